package bgp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// TestLinkTwins: two interface neighbours (issue 53: FRR's `neighbor
// swpN interface`) that learned one link-local address on two links are
// two sessions to the tracker and the guard, each held under its link;
// and a neighbour that relearns another address on its link is another
// connection to the guard, even on the same ports.
func TestLinkTwins(t *testing.T) {
	ll, llLocal := netip.MustParseAddr("fe80::b"), netip.MustParseAddr("fe80::a")
	sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 7)
	disc.Add(nil, netip.AddrPortFrom(llLocal, 179), netip.AddrPortFrom(ll, 40000), false)
	disc.Add(nil, netip.AddrPortFrom(llLocal, 179), netip.AddrPortFrom(ll, 40001), false)
	calls := make(chan string, 16)
	obs := &linkObs{calls: calls}
	tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Run(ctx) }()
	on := func(link string, addr netip.Addr, rport uint16) bgp.PeerInfo {
		return bgp.PeerInfo{Link: peer.LinkOf(link), Neighbor: addr, Local: llLocal, LocalPort: 179, RemotePort: rport,
			State: bgp.StateEstablished, Uptime: t0, Passive: true, Partial: true}
	}
	sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{on("swp1", ll, 40000), on("swp2", ll, 40001)}})
	got := map[string]bool{}
	for range 2 {
		select {
		case c := <-calls:
			got[c] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("observer calls %v, want both links up", got)
		}
	}
	if !got["up swp1 (fe80::b)"] || !got["up swp2 (fe80::b)"] {
		t.Fatalf("observer calls %v, want both links up", got)
	}
	swp1, swp2 := peer.OnLink("swp1", ""), peer.OnLink("swp2", "")
	if p, ok := tr.CachedPeer(swp2); !ok || p.RemotePort != 40001 || p.Key() != swp2 {
		t.Fatalf("the tracker's swp2 session: %+v (held %t)", p, ok)
	}

	g := bgp.NewGuard(tr, nil)
	for _, k := range []peer.Key{swp1, swp2} {
		if err := g.Before(ctx, k, "announce"); err != nil {
			t.Fatalf("Before on %s: %v", k, err)
		}
	}
	// swp2's neighbour comes back with a new MAC, so a new address, on the
	// same ports: another connection.
	relearned := netip.MustParseAddr("fe80::c")
	disc.Add(nil, netip.AddrPortFrom(llLocal, 179), netip.AddrPortFrom(relearned, 40001), false)
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: on("swp2", relearned, 40001)})
	for want := range map[string]bool{"down swp2 (fe80::b)": true, "up swp2 (fe80::c)": true} {
		select {
		case c := <-calls:
			if c != "down swp2 (fe80::b)" && c != "up swp2 (fe80::c)" {
				t.Fatalf("observer call %q, want swp2 down then up (%s)", c, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no observer call for %s", want)
		}
	}
	if err := g.After(ctx, swp1, "announce"); err != nil {
		t.Fatalf("After on swp1, whose session stayed up: %v", err)
	}
	var d *bgp.DropError
	if err := g.After(ctx, swp2, "announce"); !errors.As(err, &d) || d.Why != "connection" || d.Peer != swp2 {
		t.Fatalf("After on swp2, which relearned its neighbour's address: %v, want a drop (connection changed)", err)
	}
}

type linkObs struct{ calls chan string }

func (o *linkObs) OnEstablished(_ context.Context, p bgp.PeerInfo, _ bgp.SocketHandle) {
	o.calls <- "up " + p.Shown()
}
func (o *linkObs) OnDown(_ context.Context, p bgp.PeerInfo) { o.calls <- "down " + p.Shown() }
