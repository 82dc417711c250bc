package frr

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
)

// TestInterfaceNeighbours: the speaker lists FRR's interface neighbours
// (issue 53) under their link, asks bgpd about one by its interface and
// clears it by its interface; the passive configuration of one is read by
// its interface too; its uptime is kept per learned address.
func TestInterfaceNeighbours(t *testing.T) {
	f := newFake(t)
	f.set("show bgp vrf all neighbors json", fixture(t, "vrf-all-unnumbered-synthetic.json"))
	f.set(runningConfig, []byte("router bgp 65001\n neighbor swp1 interface remote-as external\n neighbor swp1 passive\n"+
		"router bgp 65001 vrf red\n neighbor swp3 interface remote-as external\n"))
	f.set("show bgp vrf default neighbors swp1 ", fixture(t, "vrf-default-neighbor-swp1-synthetic.json"))
	f.set("clear bgp vrf red swp3", nil)
	s := New(Options{Runner: f})
	ctx := context.Background()
	ps, err := s.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Key().String()] = p.Shown()
		if p.Key() == peerkey.OnLink("swp1", "") && (!p.Passive || p.Uptime.Unix() != 1796094377) {
			t.Errorf("swp1 = %+v, want passive (by its interface), up at its epoch", p)
		}
	}
	want := map[string]string{"10.255.9.2": "10.255.9.2", "swp1 interface": "swp1 (fe80::253:ff:fe00:201)", "swp2 interface": "swp2 (none)",
		"swp3 interface vrf red": "swp3 vrf red (fe80::253:ff:fe00:201)"}
	if len(got) != len(want) {
		t.Fatalf("Peers = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Peers[%s] = %q, want %q", k, got[k], v)
		}
	}
	p, err := s.Peer(ctx, peerkey.OnLink("swp1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if last := f.calls[len(f.calls)-1]; last != "show bgp vrf default neighbors swp1 json" {
		t.Errorf("Peer(swp1) asked %q", last)
	}
	if p.Neighbor != netip.MustParseAddr("fe80::253:ff:fe00:201") || !p.Passive || !p.Established() {
		t.Errorf("Peer(swp1) = %+v", p)
	}
	if err := s.ResetPeer(ctx, peerkey.OnLink("swp3", "red"), "revoked"); err != nil {
		t.Fatal(err)
	}
	if last := f.calls[len(f.calls)-1]; last != "clear bgp vrf red swp3" {
		t.Errorf("ResetPeer(swp3 vrf red) ran %q", last)
	}
	if err := s.ResetPeer(ctx, peerkey.Key{}, "x"); err == nil || strings.Contains(strings.Join(f.calls, "\n"), "clear bgp vrf default \n") {
		t.Errorf("ResetPeer of no peer: %v", err)
	}
}
