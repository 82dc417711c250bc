// Package peer is the one identity of a BGP peer in aokeyd: its address
// and VRF, or, for an interface neighbour (FRR's `neighbor swp1
// interface`, BGP unnumbered), its interface and VRF. Two sessions with
// the same neighbor address in two VRFs (a provider edge's customers, a
// data centre's tenants), or on two links, are two peers everywhere: in
// the session tracker and guard, the rotation controller, the daemon, the
// fleet document and the metrics. A Key becomes text only at the edges
// (logs, JSON, metric labels), through String.
package peer

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
)

// Key is one BGP peer: the neighbor's address (unmapped, without an IPv6
// zone: the zone is the link's, the VRF says where the peer is) and its
// VRF, "" for the default one; or, for an interface neighbour, its Link
// and VRF. Exactly one of Addr and Link is set in a valid Key: an
// interface neighbour's address is learned at run time and may change
// (a new MAC, a new router advertisement), so it is an attribute of the
// session (bgp.PeerInfo.Neighbor), never part of the key. It is
// comparable, the map key wherever something is kept per peer.
type Key struct {
	Addr netip.Addr
	VRF  string
	Link Link
}

// KeyOf is the key of the neighbor at addr in vrf, normalised.
func KeyOf(addr netip.Addr, vrf string) Key { return Key{Addr: addr.Unmap().WithZone(""), VRF: vrf} }

// OnLink is the key of the interface neighbour on the interface named
// iface in vrf.
func OnLink(iface, vrf string) Key { return Key{Link: LinkOf(iface), VRF: vrf} }

// IsValid reports whether k names a peer: an address or a link, not both.
func (k Key) IsValid() bool { return k.Addr.IsValid() != k.Link.IsValid() }

// IsLink reports whether k is an interface neighbour's.
func (k Key) IsLink() bool { return k.Link.IsValid() && !k.Addr.IsValid() }

// Name is the neighbor as a speaker's CLI names it, without the VRF: the
// address, or the interface of an interface neighbour (`show bgp vrf red
// neighbors swp1 json`, `clear bgp swp1`).
func (k Key) Name() string {
	if k.Link.IsValid() {
		return k.Link.Name()
	}
	return k.Addr.String()
}

// linkSuffix ends an interface neighbour's text: "swp1 interface", as
// FRR's configuration names it (`neighbor swp1 interface`). No address
// has it, so no record written before interface neighbours existed, whose
// peers are addresses, reads back as one.
const linkSuffix = " interface"

// String is the key's one text form: the address, or an interface
// neighbour's interface followed by " interface", then " vrf NAME"
// outside the default VRF ("192.0.2.2", "10.0.0.2 vrf red", "swp1
// interface", "swp1 interface vrf red"). Parse reads it back.
func (k Key) String() string {
	s := k.Name()
	if k.IsLink() {
		s += linkSuffix
	}
	if k.VRF == "" {
		return s
	}
	return s + " vrf " + k.VRF
}

// Shown is the key for people with the address it peers with: an
// interface neighbour as "swp1 (fe80::1)", "swp1 vrf red (fe80::1)", or
// "swp1 (none)" before its address is learned (FRR's word); any other key
// as String. addr is the session's neighbor address (bgp.PeerInfo's).
func (k Key) Shown(addr netip.Addr) string {
	if !k.IsLink() {
		return k.String()
	}
	s := k.Name()
	if k.VRF != "" {
		s += " vrf " + k.VRF
	}
	if !addr.IsValid() {
		return s + " (none)"
	}
	return s + " (" + addr.WithZone("").String() + ")"
}

// Parse reads String's form.
func Parse(s string) (Key, error) {
	name, vrf, hasVRF := strings.Cut(s, " vrf ")
	if hasVRF && vrf == "" {
		return Key{}, fmt.Errorf("peer %q: empty VRF name", s)
	}
	return parseName(s, name, vrf)
}

// ParseArg reads a peer an operator names (aoctl status PEER): String's
// form, or an interface neighbour's interface alone, as FRR's CLI names
// it ("swp1", "swp1 vrf red"). Records never read through it: a bare word
// in a record is no peer.
func ParseArg(s string) (Key, error) {
	k, err := Parse(s)
	if err == nil {
		return k, nil
	}
	name, vrf, hasVRF := strings.Cut(s, " vrf ")
	if (hasVRF && vrf == "") || checkLinkName(name) != nil {
		return Key{}, err
	}
	return OnLink(name, vrf), nil
}

// parseName reads a neighbor's name (an address, or an interface
// neighbour's "IFACE interface") of the text s.
func parseName(s, name, vrf string) (Key, error) {
	if iface, ok := strings.CutSuffix(name, linkSuffix); ok {
		if err := checkLinkName(iface); err != nil {
			return Key{}, fmt.Errorf("peer %q: %w", s, err)
		}
		return OnLink(iface, vrf), nil
	}
	a, err := netip.ParseAddr(name)
	if err != nil {
		return Key{}, fmt.Errorf("peer %q: %w", s, err)
	}
	if a.Zone() != "" {
		return Key{}, fmt.Errorf("peer %q: an IPv6 zone is not a VRF: write ADDR vrf NAME (an interface neighbour: IFACE interface)", s)
	}
	return KeyOf(a, vrf), nil
}

// ParseWithVRF reads a key from a record written before a key was one
// field: s is String's form, or a bare address (mapped, or with a zone,
// as older records kept it: normalised as KeyOf does) whose VRF is vrf,
// the field older records kept beside it ("" the default VRF). A VRF
// named in both places must be the same one. Every record that holds a
// Key reads its older entries through it, so that an upgrade loses none;
// and as older records never held an interface neighbour, no older entry
// reads as one (a bare word is no peer, as before).
func ParseWithVRF(s, vrf string) (Key, error) {
	if _, inS, ok := strings.Cut(s, " vrf "); ok {
		k, err := Parse(s)
		if err == nil && vrf != "" && vrf != inS {
			err = fmt.Errorf("peer %q: vrf %q beside it names another VRF", s, vrf)
		}
		return k, err
	}
	if strings.HasSuffix(s, linkSuffix) {
		return parseName(s, s, vrf)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Key{}, fmt.Errorf("peer %q: %w", s, err)
	}
	return KeyOf(a, vrf), nil
}

// Compare orders keys: address keys by address, then interface
// neighbours by interface name; each then by VRF.
func (k Key) Compare(o Key) int {
	if k.IsLink() != o.IsLink() {
		if k.IsLink() {
			return 1
		}
		return -1
	}
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if c := strings.Compare(k.Link.Name(), o.Link.Name()); c != 0 {
		return c
	}
	return strings.Compare(k.VRF, o.VRF)
}

// LogValue logs a key as its text.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalText writes String's form: a Key is its own field in every
// record and document (JSON object keys included).
func (k Key) MarshalText() ([]byte, error) {
	if !k.IsValid() {
		return nil, fmt.Errorf("peer: marshalling a key with no address or interface (or both)")
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads String's form (Parse).
func (k *Key) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}
