// Package peer is the one identity of a BGP peer in aokeyd: its address
// and VRF. Two sessions with the same neighbor address in two VRFs (a
// provider edge's customers, a data centre's tenants) are two peers
// everywhere: in the session tracker and guard, the rotation controller,
// the daemon, the fleet document and the metrics. A Key becomes text only
// at the edges (logs, JSON, metric labels), through String.
package peer

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
)

// Key is one BGP peer: the neighbor's address (unmapped, without an IPv6
// zone: the zone is the link's, the VRF says where the peer is) and its
// VRF, "" for the default one. It is comparable, the map key wherever
// something is kept per peer.
type Key struct {
	Addr netip.Addr
	VRF  string
}

// KeyOf is the key of the neighbor at addr in vrf, normalised.
func KeyOf(addr netip.Addr, vrf string) Key { return Key{Addr: addr.Unmap().WithZone(""), VRF: vrf} }

// IsValid reports whether k names a peer.
func (k Key) IsValid() bool { return k.Addr.IsValid() }

// String is the key's one text form: the address, followed by " vrf
// NAME" outside the default VRF ("192.0.2.2", "10.0.0.2 vrf red"). Parse
// reads it back.
func (k Key) String() string {
	if k.VRF == "" {
		return k.Addr.String()
	}
	return k.Addr.String() + " vrf " + k.VRF
}

// Parse reads String's form.
func Parse(s string) (Key, error) {
	addr, vrf, hasVRF := strings.Cut(s, " vrf ")
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return Key{}, fmt.Errorf("peer %q: %w", s, err)
	}
	if a.Zone() != "" {
		return Key{}, fmt.Errorf("peer %q: an IPv6 zone is not a VRF: write ADDR vrf NAME", s)
	}
	if hasVRF && vrf == "" {
		return Key{}, fmt.Errorf("peer %q: empty VRF name", s)
	}
	return KeyOf(a, vrf), nil
}

// ParseWithVRF reads a key from a record written before a key was one
// field: s is String's form, or a bare address (mapped, or with a zone,
// as older records kept it: normalised as KeyOf does) whose VRF is vrf,
// the field older records kept beside it ("" the default VRF). A VRF
// named in both places must be the same one. Every record that holds a
// Key reads its older entries through it, so that an upgrade loses none.
func ParseWithVRF(s, vrf string) (Key, error) {
	if _, inS, ok := strings.Cut(s, " vrf "); ok {
		k, err := Parse(s)
		if err == nil && vrf != "" && vrf != inS {
			err = fmt.Errorf("peer %q: vrf %q beside it names another VRF", s, vrf)
		}
		return k, err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Key{}, fmt.Errorf("peer %q: %w", s, err)
	}
	return KeyOf(a, vrf), nil
}

// Compare orders keys by address, then VRF.
func (k Key) Compare(o Key) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
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
		return nil, fmt.Errorf("peer: marshalling a key with no address")
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
