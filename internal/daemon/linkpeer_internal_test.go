package daemon

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/policy"
)

// TestInterfaceNeighbourManaged: FRR reports its interface neighbours
// (issue 53) with the link-local address each learned. One is managed
// (core.bindingOf) by its link's binding once it learned an address that
// no address binding covers (that address is the address binding's, on
// the listener too) and that the last recompute did not refuse it
// (another link's neighbour holds it with another chain).
func TestInterfaceNeighbourManaged(t *testing.T) {
	pol, err := policy.Parse("p.yaml", []byte(`key_chains: [{name: c}, {name: f}]
peers:
  - {neighbor: fe80::/120, key_chain: c}
  - {neighbor_interface: [swp1, swp2], key_chain: f}
`))
	if err != nil {
		t.Fatal(err)
	}
	rc := &reconciler{}
	co := &core{recon: rc}
	co.setPolicy(pol)
	refused := map[peer.Key]netip.Addr{peer.OnLink("swp2", ""): netip.MustParseAddr("fe80::1:b")}
	rc.links.refused.Store(&refused)
	link := func(name, addr string) bgp.PeerInfo {
		p := bgp.PeerInfo{Link: peer.LinkOf(name)}
		if addr != "" {
			p.Neighbor = netip.MustParseAddr(addr)
		}
		return p
	}
	for _, c := range []struct {
		p     bgp.PeerInfo
		chain string // "": not managed
	}{
		{bgp.PeerInfo{Neighbor: netip.MustParseAddr("fe80::b")}, "c"},
		{link("swp1", "fe80::1:b"), "f"},
		{link("swp1", ""), ""},           // nothing learned yet
		{link("swp1", "fe80::b"), ""},    // the address binding's address
		{link("swp2", "fe80::1:b"), ""},  // refused that address
		{link("swp2", "fe80::2:b"), "f"}, // a relearned address is its own
		{link("swp3", "fe80::1:c"), ""},  // no binding names swp3
	} {
		b, err := co.bindingOf(c.p)
		switch {
		case c.chain == "" && (err == nil || co.managed(c.p)):
			t.Errorf("%s: managed by %v, want not", c.p.Shown(), b)
		case c.chain != "" && (err != nil || b.KeyChain != c.chain || !co.managed(c.p)):
			t.Errorf("%s: binding %v, %v; want chain %s", c.p.Shown(), b, err, c.chain)
		}
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

// TestLinkName: a connect's zone is its scope id, an ifindex in decimal:
// it names the interface with that index; a name stays as it is.
func TestLinkName(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Fatalf("no interface to name: %v", err)
	}
	if got := linkName(strconv.Itoa(ifs[0].Index)); got != ifs[0].Name {
		t.Errorf("linkName(%d) = %q, want %q", ifs[0].Index, got, ifs[0].Name)
	}
	if got := linkName("swp1"); got != "swp1" {
		t.Errorf("linkName(swp1) = %q", got)
	}
}
