package bgp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

// TestGuardAnswersFromTrackedSessions: the guard, asking the tracker,
// costs the speaker nothing while the tracker can vouch for the session
// (stream synced and quiet), asks the speaker about the neighbor when it
// cannot (before the first sync, after the stream broke, for a neighbor it
// does not hold), and a drop seen through the stream during a step still
// fails the step.
func TestGuardAnswersFromTrackedSessions(t *testing.T) {
	est := up(0, t0, 40000)
	reup := up(1, t0.Add(60e9), 40001)
	idle := bgp.PeerInfo{Neighbor: nbr, State: bgp.StateIdle}
	for _, tc := range []struct {
		name string
		// prepare runs after the tracker started, before the step;
		// unmanaged makes the tracker's Managed say no.
		prepare func(sp *bgptest.Speaker, unmanaged *atomic.Bool)
		// during runs inside the step, the connection c the session is on.
		during    func(sp *bgptest.Speaker, disc *bgptest.Discoverer, c sockets.Ref)
		wantAsked int
		wantErr   error
	}{
		{name: "synced and quiet: from the cache",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
			}},
		{name: "not yet synced: asks the speaker", prepare: func(*bgptest.Speaker, *atomic.Bool) {}, wantAsked: 2},
		{name: "stream lost: asks the speaker",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
				sp.Lose()
			}, wantAsked: 2},
		{name: "resynced after a loss: from the cache again",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
				sp.Lose()
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
			}},
		{name: "neighbor not tracked: asks the speaker",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) { sp.Send(bgp.Event{Kind: bgp.EventSync}) }, wantAsked: 2},
		{name: "event ignored while unmanaged: asks the speaker",
			prepare: func(sp *bgptest.Speaker, unmanaged *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
				synctest.Wait()
				unmanaged.Store(true)
				sp.Send(bgp.Event{Kind: bgp.EventState, Peer: idle}) // the speaker, asked, still says est
				synctest.Wait()
				unmanaged.Store(false)
			}, wantAsked: 2},
		{name: "drop seen through the stream fails the step",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
			},
			during: func(sp *bgptest.Speaker, _ *bgptest.Discoverer, _ sockets.Ref) {
				sp.Set(idle)
				synctest.Wait()
			}, wantAsked: 1, wantErr: bgp.ErrSessionDropped},
		{name: "re-established on another connection fails the step",
			prepare: func(sp *bgptest.Speaker, _ *atomic.Bool) {
				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
			},
			during: func(sp *bgptest.Speaker, disc *bgptest.Discoverer, c sockets.Ref) {
				disc.Drop(c.Inode)
				connect(disc, 179, 40001)
				sp.Send(bgp.Event{Kind: bgp.EventState, Peer: idle})
				sp.Set(reup)
				synctest.Wait()
			}, wantErr: bgp.ErrSessionDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := bgptest.NewScriptedSpeaker("fake", 100, 4, est)
				disc := bgptest.NewDiscoverer(100, 7)
				c := connect(disc, 179, 40000)
				var unmanaged atomic.Bool
				tr := bgp.NewTracker(sp, disc, &nopObs{}, bgp.TrackerOptions{Managed: func(bgp.PeerInfo) bool { return !unmanaged.Load() }})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- tr.Run(ctx) }()
				defer func() { cancel(); sp.Close(); <-done }()
				synctest.Wait()
				tc.prepare(sp, &unmanaged)
				synctest.Wait()
				g := bgp.NewGuard(tr, nil)
				ran := false
				err := step(ctx, g, nbrKey, "switch", func(context.Context) error {
					ran = true
					if tc.during != nil {
						tc.during(sp, disc, c)
					}
					return nil
				})
				if !ran {
					t.Fatalf("the step did not run: %v", err)
				}
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Errorf("Step: %v, want %v", err, tc.wantErr)
				}
				if got := sp.Queries(); got != tc.wantAsked {
					t.Errorf("the speaker was asked %d times, want %d", got, tc.wantAsked)
				}
			})
		})
	}
}

type nopObs struct{}

func (nopObs) OnEstablished(context.Context, bgp.PeerInfo, bgp.SocketHandle) {}
func (nopObs) OnDown(context.Context, bgp.PeerInfo)                          {}
