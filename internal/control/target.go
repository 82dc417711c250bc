package control

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// A request's peer and vrf are shown (in an answer, an audit line, a log
// line) only when they parse as one: a peer as an IP address, a vrf as a
// VRF device name. Anything else is refused before a backend sees it,
// saying what it is not, without the text: an argument typed or pasted
// into the wrong place may be a secret.

// vrfName is a VRF device's name as the kernel takes it (IFNAMSIZ - 1
// bytes), in the plain letters, digits, '.', '-' and '_' that ip-link
// names use.
var vrfName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,14}$`)

func validPeer(s string) bool { _, err := netip.ParseAddr(s); return err == nil }

func validVRF(s string) bool { return vrfName.MatchString(s) }

// shownPeer is s for a log line: itself when it is empty or an address.
func shownPeer(s string) string {
	if s == "" || validPeer(s) {
		return s
	}
	return "(not an IP address, not shown)"
}

// shownVRF is s for a log line: itself when it is empty or a VRF name.
func shownVRF(s string) string {
	if s == "" || validVRF(s) {
		return s
	}
	return "(not a VRF name, not shown)"
}

// shownPrefix is s for a log line: itself when it is empty or a prefix.
func shownPrefix(s string) string {
	if _, err := netip.ParsePrefix(s); s == "" || err == nil {
		return s
	}
	return "(not a prefix, not shown)"
}

// checkTarget refuses a peer that is set and not an IP address, and a
// vrf that is set and not a VRF name.
func checkTarget(peer, vrf string) error {
	if peer != "" && !validPeer(peer) {
		return fmt.Errorf("%w: peer is not an IP address (the value is not shown)", ErrInvalid)
	}
	if vrf != "" && !validVRF(vrf) {
		return fmt.Errorf("%w: vrf is not a VRF name: 1..15 of letters, digits, '.', '-' and '_' (the value is not shown)", ErrInvalid)
	}
	return nil
}

// checkStatusPeer refuses a status query's peer, when set, that is not
// peer.Key's text form ("192.0.2.2", "10.0.0.2 vrf red", an interface
// neighbour's "swp1 interface", "swp1 interface vrf red", or its
// interface alone: peer.ParseArg) with a VRF name. An interface name is
// held to the VRF names' plain letters, as strictly as a VRF's.
func checkStatusPeer(s string) error {
	if s == "" {
		return nil
	}
	name, vrf, hasVRF := strings.Cut(s, " vrf ")
	if hasVRF && vrf == "" {
		return fmt.Errorf("%w: peer: an empty VRF name after \" vrf \"", ErrInvalid)
	}
	if validIface(strings.TrimSuffix(name, " interface")) {
		return checkTarget("", vrf) // the VRF's problem, if any
	}
	return checkTarget(name, vrf)
}

// validIface reports whether s is an interface name a status query may
// name, in the letters a VRF name may have (not an address: an IPv4
// address is also such a name, and reads as the address it is).
func validIface(s string) bool { return vrfName.MatchString(s) && !validPeer(s) }

// targetOf returns a request's peer and vrf.
func targetOf(req any) (peer, vrf string) {
	switch r := req.(type) {
	case RotateRequest:
		return r.Peer, r.VRF
	case RevokeRequest:
		return r.Peer, r.VRF
	case AdoptRequest:
		return r.Peer, r.VRF
	case MigrateRequest:
		return r.Peer, r.VRF
	}
	return "", ""
}
