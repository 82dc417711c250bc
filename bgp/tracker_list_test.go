package bgp_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
)

// TestSyncListsConnectionsOnce: a sync of the speaker's full peer list
// finds every Established session in one listing of the speaker's
// connections (bgp.ConnectionsLister), with and without the ports in the
// report: one lookup per peer was a sock_diag dump and a descriptor
// search each, O(N^2) a sync at a route server (and the watch lists again
// every minute). Every session is still handed over on its own socket.
func TestSyncListsConnectionsOnce(t *testing.T) {
	const n = 40
	sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 7)
	var peers []bgp.PeerInfo
	inodes := map[netip.Addr]uint64{}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, 254, byte(i / 200), byte(i%200 + 2)})
		r := disc.Add(nil, netip.AddrPortFrom(local, 179), netip.AddrPortFrom(a, uint16(40000+i)), false)
		inodes[a] = r.Inode
		p := bgp.PeerInfo{Neighbor: a, Local: local, State: bgp.StateEstablished, Uptime: t0, Passive: true}
		if i%2 == 0 { // half the reports carry the ports (gobgpd's listing carries none)
			p.LocalPort, p.RemotePort = 179, uint16(40000+i)
		}
		peers = append(peers, p)
	}
	obs := &recObs{calls: make(chan call, 2*n)}
	tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Run(ctx) }()
	defer func() { cancel(); sp.Close(); <-done }()
	sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: peers})
	for range n {
		select {
		case c := <-obs.calls:
			if c.kind != "up" || c.inode != inodes[c.peer] {
				t.Fatalf("handed over %+v, want %s up on inode %d", c, c.peer, inodes[c.peer])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not every session handed over")
		}
	}
	if single, listings := disc.Lookups(); single != 0 || listings != 1 {
		t.Fatalf("a sync of %d sessions: %d lookups one by one and %d listings, want none and one", n, single, listings)
	}
}
