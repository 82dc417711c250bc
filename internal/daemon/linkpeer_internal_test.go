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
