package daemon

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/policy"
)

// TestInterfaceNeighbourNotManaged: FRR reports its interface neighbours
// (issue 53) with the link-local address each learned. Until the passes
// key them, none is managed, even when an address binding covers the
// address it learned: the binding is the address's, not the link's.
func TestInterfaceNeighbourNotManaged(t *testing.T) {
	pol, err := policy.Parse("p.yaml", []byte("key_chains: [{name: c}]\npeers: [{neighbor: fe80::/64, key_chain: c}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	co := &core{}
	co.setPolicy(pol)
	ll := netip.MustParseAddr("fe80::b")
	if !co.managed(bgp.PeerInfo{Neighbor: ll}) {
		t.Fatal("the neighbor at fe80::b, which the binding covers, is not managed")
	}
	if p := (bgp.PeerInfo{Link: peer.LinkOf("swp1"), Neighbor: ll}); co.managed(p) {
		t.Errorf("the interface neighbour %s is managed through an address binding", p.Shown())
	}
}

// TestNamedBy: aoctl status names an interface neighbour by its key's
// text or by its interface alone (in any VRF without one), or by the
// address it learned; a neighbor by address as before.
func TestNamedBy(t *testing.T) {
	swp1red := bgp.PeerInfo{Link: peer.LinkOf("swp1"), VRF: "red", Neighbor: netip.MustParseAddr("fe80::b")}
	byAddr := bgp.PeerInfo{Neighbor: netip.MustParseAddr("192.0.2.2")}
	for _, c := range []struct {
		info bgp.PeerInfo
		arg  string
		want bool
	}{
		{swp1red, "swp1 interface vrf red", true},
		{swp1red, "swp1 vrf red", true},
		{swp1red, "swp1", true},
		{swp1red, "fe80::b", true},
		{swp1red, "swp1 vrf blue", false},
		{swp1red, "swp2", false},
		{swp1red, "swp1 interface", true}, // without a VRF, in any (as an address is)
		{byAddr, "192.0.2.2", true},
		{byAddr, "192.0.2.3", false},
		{byAddr, "swp1", false},
	} {
		if got := namedBy(c.info, c.arg); got != c.want {
			t.Errorf("namedBy(%s, %q) = %t, want %t", c.info.Shown(), c.arg, got, c.want)
		}
	}
}
