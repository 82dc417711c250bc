package bgp_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
)

// gateObs holds the tracker's event loop in OnEstablished of other (the
// speaker's event for another session being applied) until open closes.
type gateObs struct {
	other netip.Addr
	open  chan struct{}
}

func (o *gateObs) OnEstablished(_ context.Context, p bgp.PeerInfo, _ bgp.SocketHandle) {
	if p.Neighbor == o.other {
		<-o.open
	}
}
func (o *gateObs) OnDown(context.Context, bgp.PeerInfo) {}

// TestTrackerWaitsForPendingEvents: a question the cache cannot answer
// only because events are being applied (under load the tracker's loop
// lags behind the stream, and every peer's guard then asked the speaker at
// once: a 512-peer roll had 40 rolls abort on ListPeer timeouts) waits,
// boundedly, for the events pending when it was asked, and then answers
// from the tracked sessions -- or asks the speaker, when those events
// took the session out, or when they are not applied within PendingWait.
func TestTrackerWaitsForPendingEvents(t *testing.T) {
	other := netip.MustParseAddr("10.255.0.9")
	est := up(0, t0, 40000)
	otherUp := bgp.PeerInfo{Neighbor: other, Local: local, LocalPort: 179, RemotePort: 40009, State: bgp.StateEstablished, Passive: true}
	idle := bgp.PeerInfo{Neighbor: nbr, State: bgp.StateIdle}
	for _, tc := range []struct {
		name string
		// pending is set (the speaker's table, and an event) after the
		// event that holds the loop.
		pending   []bgp.PeerInfo
		hold      time.Duration // how long the loop is held (0: until the end)
		want      bgp.SessionState
		wantAsked int
		wantWait  time.Duration
	}{
		{name: "another session's event: from the cache once applied", hold: 300 * time.Millisecond,
			want: bgp.StateEstablished, wantWait: 300 * time.Millisecond},
		{name: "the session dropped in a pending event: asks the speaker", hold: 300 * time.Millisecond,
			pending: []bgp.PeerInfo{idle}, want: bgp.StateIdle, wantAsked: 1, wantWait: 300 * time.Millisecond},
		{name: "not applied within PendingWait: asks the speaker",
			want: bgp.StateEstablished, wantAsked: 1, wantWait: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := bgptest.NewScriptedSpeaker("fake", 100, 4, est)
				disc := bgptest.NewDiscoverer(100, 7)
				connect(disc, 179, 40000)
				disc.Add(nil, netip.AddrPortFrom(local, 179), netip.AddrPortFrom(other, 40009), false)
				obs := &gateObs{other: other, open: make(chan struct{})}
				tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{PendingWait: time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- tr.Run(ctx) }()
				defer func() { cancel(); sp.Close(); <-done }()
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
				synctest.Wait()
				if _, ok := tr.CachedPeer(nbrKey); !ok {
					t.Fatal("synced and quiet, the tracker does not vouch for the session")
				}
				sp.Send(bgp.Event{Kind: bgp.EventState, Peer: otherUp})
				for _, p := range tc.pending {
					sp.Set(p)
				}
				synctest.Wait() // the loop is held applying otherUp
				if tc.hold > 0 {
					go func() { time.Sleep(tc.hold); close(obs.open) }()
				} else {
					defer close(obs.open)
				}
				start := time.Now()
				p, err := tr.Peer(ctx, nbrKey)
				if err != nil {
					t.Fatal(err)
				}
				if p.State != tc.want {
					t.Errorf("Peer: %s, want %s", p.State, tc.want)
				}
				if got := time.Since(start); got != tc.wantWait {
					t.Errorf("Peer answered after %v, want %v", got, tc.wantWait)
				}
				if got := sp.Queries(); got != tc.wantAsked {
					t.Errorf("the speaker was asked %d times, want %d", got, tc.wantAsked)
				}
			})
		})
	}
}
