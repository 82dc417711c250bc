package frr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
)

// ErrMalformed is wrapped by every error about vtysh output that cannot be
// decoded.
var ErrMalformed = errors.New("malformed FRR output")

// maxOutput bounds the vtysh output read (a listing of thousands of
// neighbors fits many times over).
const maxOutput = 64 << 20

// neighborJSON is the part of one neighbor of `show bgp ... neighbors json`
// aokeyd reads.
type neighborJSON struct {
	// bgpNeighborAddr is present for an interface neighbour alone (`neighbor
	// swp1 interface`, keyed by the interface's name): the address
	// learned on the link (IPv6 link-local from router advertisements,
	// or the far end of an IPv4 /30 or /31), "none" before one is.
	BGPNeighborAddr        *string         `json:"bgpNeighborAddr"`
	RemoteAs               json.RawMessage `json:"remoteAs"`
	BGPState               string          `json:"bgpState"`
	EstablishedEpoch       int64           `json:"bgpTimerUpEstablishedEpoch"`
	ConnectionsEstablished uint32          `json:"connectionsEstablished"`
	ConnectionsDropped     uint32          `json:"connectionsDropped"`
	// hostLocal is "Unknown" and the ports -1 without a connection.
	HostLocal   string `json:"hostLocal"`
	PortLocal   int32  `json:"portLocal"`
	HostForeign string `json:"hostForeign"`
	PortForeign int32  `json:"portForeign"`
	// adminShutDown is present (true) when the neighbor is shut down; the
	// state stays "Idle".
	AdminShutDown bool `json:"adminShutDown"`
	// authenticationEnabled is present (1) when the neighbor has a TCP-MD5
	// password; the password itself is not in the output.
	AuthenticationEnabled int `json:"authenticationEnabled"`
	// nbrDesc is the neighbor's description, when configured.
	NbrDesc string `json:"nbrDesc"`
	// lastResetDueTo and lastResetTimerMsecs (how long ago) say why and
	// when the session last went down; FRR gives them while it is down.
	LastResetDueTo      string `json:"lastResetDueTo"`
	LastResetTimerMsecs *int64 `json:"lastResetTimerMsecs"`
}

// peer is one decoded neighbor with what makes its connection unique.
type peer struct {
	info bgp.PeerInfo
	// epoch is FRR's bgpTimerUpEstablishedEpoch (see doc.go), conns its
	// connectionsEstablished.
	epoch int64
	conns uint32
	// downAgo is how long ago the session went down (lastResetTimerMsecs)
	// and downWhy why, when haveDown: the listing turns them into
	// PeerInfo.LastDown and LastDownReason.
	downAgo  time.Duration
	downWhy  string
	haveDown bool
	// desc is the neighbor's description (nbrDesc).
	desc string
}

// decodeNeighbors decodes `show bgp vrf all neighbors json` (an object of
// VRFs, each an object of neighbors) or `show bgp vrf NAME neighbors
// [NEIGHBOR] json` (one VRF's object; its name is vrfHint when the object
// does not say). A neighbor is keyed by its address, or by its interface
// for an interface neighbour (its object has bgpNeighborAddr). Other keys
// (vrfId, vrfName, whatever a later FRR adds) are skipped; an address key
// whose value is not a neighbor object is an error, and so is an
// interface neighbour's key that is no interface name.
func decodeNeighbors(data []byte, vrfHint string) ([]peer, error) {
	if len(data) > maxOutput {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrMalformed, len(data), maxOutput)
	}
	top, err := object(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(top) == 0 || noSuchNeighbor(top) {
		return nil, nil
	}
	if single(top) {
		return decodeVRF(vrfHint, top)
	}
	vrfs := make(map[string]map[string]json.RawMessage, len(top))
	for name, raw := range top {
		vrf, err := object(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: vrf %q: %w", ErrMalformed, name, err)
		}
		if isLinkNeighbor(vrf) {
			// `show bgp vrf NAME neighbors swp1 json`: one interface
			// neighbour, with no vrfName beside it.
			return decodeVRF(vrfHint, top)
		}
		vrfs[name] = vrf
	}
	var out []peer
	for name, vrf := range vrfs {
		ps, err := decodeVRF(name, vrf)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// single reports whether top is one VRF's object (`show bgp vrf NAME
// neighbors ...`: its neighbors, with or without vrfId and vrfName, or
// bgpNoSuchNeighbor) rather than an object of VRFs. One interface
// neighbour's answer has none of these keys: decodeNeighbors tells it by
// its object (isLinkNeighbor).
func single(top map[string]json.RawMessage) bool {
	for k := range top {
		if _, err := netip.ParseAddr(k); err == nil || k == "vrfName" || k == "vrfId" || k == "bgpNoSuchNeighbor" {
			return true
		}
	}
	return false
}

// noSuchNeighbor reports whether top is bgpd's answer about a neighbor
// name it has no neighbor for (`show bgp vrf X neighbors swp9 json` for an
// interface that is no neighbour's): one "warning" member, a string.
func noSuchNeighbor(top map[string]json.RawMessage) bool {
	raw, ok := top["warning"]
	var s string
	return ok && len(top) == 1 && json.Unmarshal(raw, &s) == nil
}

// isLinkNeighbor reports whether m, a member of FRR's top object, is an
// interface neighbour's object (it has bgpNeighborAddr) rather than a
// VRF's (vrfName, vrfId).
func isLinkNeighbor(m map[string]json.RawMessage) bool {
	_, nbr := m["bgpNeighborAddr"]
	_, name := m["vrfName"]
	_, id := m["vrfId"]
	return nbr && !name && !id
}

// decodeVRF decodes one VRF's object; name is its key in a vrf-all listing
// ("" when the object stands alone: its vrfName is used).
func decodeVRF(name string, vrf map[string]json.RawMessage) ([]peer, error) {
	if raw, ok := vrf["vrfName"]; ok {
		var n string
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("%w: vrfName: %w", ErrMalformed, err)
		}
		if name == "" {
			name = n
		}
	}
	if name == "default" {
		name = ""
	}
	var out []peer
	for k, raw := range vrf {
		var link peerkey.Link
		addr, err := netip.ParseAddr(k)
		if err != nil {
			if k == "vrfId" || k == "vrfName" || k == "bgpNoSuchNeighbor" || !isObject(raw) {
				continue
			}
			link = peerkey.LinkOf(k) // checked below, once it is known to be a neighbor
		}
		var n neighborJSON
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("%w: neighbor %s (vrf %q): %w", ErrMalformed, k, vrfLabel(name), err)
		}
		if link.IsValid() {
			if n.BGPNeighborAddr == nil {
				continue // not a neighbor: a key a later FRR may add
			}
			if err := peerkey.CheckLinkName(k); err != nil {
				return nil, fmt.Errorf("%w: interface neighbor %q (vrf %q): %w", ErrMalformed, k, vrfLabel(name), err)
			}
			if addr, err = n.learned(); err != nil {
				return nil, fmt.Errorf("%w: interface neighbor %s (vrf %q): %w", ErrMalformed, k, vrfLabel(name), err)
			}
		}
		p, err := n.peer(addr.Unmap(), link, name)
		if err != nil {
			return nil, fmt.Errorf("%w: neighbor %s (vrf %q): %w", ErrMalformed, k, vrfLabel(name), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// learned is an interface neighbour's address (bgpNeighborAddr), the zero
// Addr while FRR has learned none ("none").
func (n neighborJSON) learned() (netip.Addr, error) {
	if *n.BGPNeighborAddr == "none" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(*n.BGPNeighborAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bgpNeighborAddr %q: %w", *n.BGPNeighborAddr, err)
	}
	return a.WithZone(""), nil // the zone is the link, which the key holds
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

func vrfLabel(v string) string {
	if v == "" {
		return "default"
	}
	return v
}

// peer is the neighbor at addr (invalid: an interface neighbour's not
// learned yet), on link for an interface neighbour, in vrf.
func (n neighborJSON) peer(addr netip.Addr, link peerkey.Link, vrf string) (peer, error) {
	p := peer{epoch: n.EstablishedEpoch, conns: n.ConnectionsEstablished}
	p.info = bgp.PeerInfo{
		Neighbor: addr,
		VRF:      vrf,
		Link:     link,
		State:    sessionState(n.BGPState),
		Flops:    n.ConnectionsDropped,
	}
	if n.AdminShutDown {
		p.info.Admin = bgp.AdminDown
	}
	p.info.MD5 = n.AuthenticationEnabled != 0
	p.desc = n.NbrDesc
	if n.LastResetTimerMsecs != nil && *n.LastResetTimerMsecs >= 0 {
		p.downAgo, p.downWhy, p.haveDown = time.Duration(*n.LastResetTimerMsecs)*time.Millisecond, n.LastResetDueTo, true
	}
	if len(n.RemoteAs) > 0 {
		as, err := asn(n.RemoteAs)
		if err != nil {
			return p, fmt.Errorf("remoteAs: %w", err)
		}
		p.info.PeerASN = as
	}
	if n.HostLocal != "" && n.HostLocal != "Unknown" {
		la, err := netip.ParseAddr(n.HostLocal)
		if err != nil {
			return p, fmt.Errorf("hostLocal %q: %w", n.HostLocal, err)
		}
		p.info.Local = la.Unmap()
	}
	for _, port := range []int32{n.PortLocal, n.PortForeign} {
		if port < -1 || port > 65535 {
			return p, fmt.Errorf("port %d out of range", port)
		}
	}
	if p.info.Established() && n.PortLocal > 0 && n.PortForeign > 0 {
		p.info.LocalPort, p.info.RemotePort = uint16(n.PortLocal), uint16(n.PortForeign)
	}
	return p, nil
}

// asn reads remoteAs: a number, or a string in asplain or asdot ("1.10")
// notation (FRR's `bgp as-notation`).
func asn(raw json.RawMessage) (uint32, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n uint32
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("%s is not an AS number", raw)
		}
		return n, nil
	}
	hi, lo, dot := strings.Cut(s, ".")
	if !dot {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not an AS number", s)
		}
		return uint32(v), nil
	}
	h, err1 := strconv.ParseUint(hi, 10, 16)
	l, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not an AS number", s)
	}
	return uint32(h<<16 | l), nil
}

// object decodes a JSON object into its members, refusing anything else.
func object(data []byte) (map[string]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// sessionState maps FRR's bgpState (lookup_msg(bgp_status_msg)).
func sessionState(s string) bgp.SessionState {
	switch s {
	case "Idle", "Clearing", "Deleted":
		return bgp.StateIdle
	case "Connect":
		return bgp.StateConnect
	case "Active":
		return bgp.StateActive
	case "OpenSent":
		return bgp.StateOpenSent
	case "OpenConfirm":
		return bgp.StateOpenConfirm
	case "Established":
		return bgp.StateEstablished
	}
	return bgp.StateUnknown
}

// runningConfig is the command that shows bgpd's configuration: the
// passive neighbors are read from it. It holds TCP-MD5 passwords in clear
// text: the answer is parsed as bytes, no part of a password line is kept,
// and the buffer is zeroed.
const runningConfig = "show running-config"

// passiveConfig is what the filtered running configuration says: the
// neighbors (and peer groups) that are passive, and each neighbor's peer
// group, by cfgKey.
type passiveConfig struct {
	passive map[string]bool
	group   map[string]string
}

// has reports whether the neighbor k is passive, itself or through its
// peer group: by its address, or an interface neighbour's interface.
func (m passiveConfig) has(k peerkey.Key) bool {
	return m.hasName(k.VRF, k.Name())
}

func (m passiveConfig) hasName(vrf, neighbor string) bool {
	k := cfgKey(vrf, neighbor)
	if m.passive[k] {
		return true
	}
	g, ok := m.group[k]
	return ok && m.passive[cfgKey(vrf, g)]
}

// parsePassive reads `show running-config`: lines
// "neighbor X passive", "neighbor ADDR peer-group NAME" and "neighbor
// IFACE interface ... peer-group NAME" under "router bgp ASN [vrf NAME]".
func parsePassive(running []byte) passiveConfig {
	m := passiveConfig{passive: map[string]bool{}, group: map[string]string{}}
	vrf := ""
	for line := range bytes.Lines(running) {
		f := bytes.Fields(line)
		switch {
		case len(f) >= 3 && string(f[0]) == "router" && string(f[1]) == "bgp":
			vrf = ""
			if len(f) >= 5 && string(f[3]) == "vrf" {
				vrf = string(f[4])
			}
		case len(f) == 3 && string(f[0]) == "neighbor" && string(f[2]) == "passive":
			m.passive[cfgKey(vrf, neighborName(f[1]))] = true
		case len(f) == 4 && string(f[0]) == "neighbor" && string(f[2]) == "peer-group":
			m.group[cfgKey(vrf, neighborName(f[1]))] = string(f[3])
		case len(f) >= 5 && string(f[0]) == "neighbor" && string(f[2]) == "interface":
			// An interface neighbour names its peer group on its own line:
			// "neighbor swp1 interface [v6only] peer-group NAME [remote-as ...]".
			for i := 3; i+1 < len(f); i++ {
				if string(f[i]) == "peer-group" {
					m.group[cfgKey(vrf, string(f[1]))] = string(f[i+1])
				}
			}
		}
	}
	return m
}

// neighborName is a neighbor's address in netip's spelling (so that
// "2001:DB8::2" and "2001:db8::2" match), or a peer group's name.
func neighborName(b []byte) string {
	if a, err := netip.ParseAddr(string(b)); err == nil {
		return a.Unmap().String()
	}
	return string(b)
}

func cfgKey(vrf, neighbor string) string {
	if vrf == "default" {
		vrf = ""
	}
	return vrf + "|" + neighbor
}
