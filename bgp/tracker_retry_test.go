package bgp_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
)

// TestTrackerRetriesSocketNotFound: a session the speaker lists as
// Established whose socket cannot be told yet (gobgpd's ListPeer gives no
// live ports, and a connection collision leaves two connections to the
// neighbor for a moment) is looked for again until it is found, not left
// without a socket until the speaker's next event for it, which a stable
// session never sends. A state change for the peer ends the search.
func TestTrackerRetriesSocketNotFound(t *testing.T) {
	est := bgp.PeerInfo{Neighbor: nbr, Local: local, State: bgp.StateEstablished}
	for _, tc := range []struct {
		name   string
		then   []bgp.Event // after the failed lookup, before the collision is resolved
		wantUp bool
	}{
		{"collision resolved", nil, true},
		{"peer went down meanwhile", []bgp.Event{{Kind: bgp.EventState, Peer: bgp.PeerInfo{Neighbor: nbr, State: bgp.StateIdle}}}, false},
		{"removed from the speaker's config", []bgp.Event{{Kind: bgp.EventSync}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
				// The collision: the passive connection and the speaker's own.
				disc := bgptest.NewDiscoverer(100, 7)
				passive, own := connect(disc, 179, 40000), connect(disc, 50000, 179)
				obs := &recObs{calls: make(chan call, 16)}
				tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- tr.Run(ctx) }()
				defer func() {
					cancel()
					sp.Close()
					<-done
				}()

				sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
				synctest.Wait()
				if len(obs.calls) != 0 {
					t.Fatalf("handed over %+v with two connections to the neighbor", <-obs.calls)
				}
				for _, ev := range tc.then {
					sp.Send(ev)
				}
				synctest.Wait()
				// The collision's loser is closed.
				disc.Drop(own.Inode)
				time.Sleep(time.Minute)
				synctest.Wait()
				var got []call
				for len(obs.calls) > 0 {
					got = append(got, <-obs.calls)
				}
				switch {
				case tc.wantUp && (len(got) != 1 || got[0] != call{"up", nbr, passive.Inode}):
					t.Fatalf("observer got %+v, want the session on inode %d once", got, passive.Inode)
				case !tc.wantUp && len(got) != 0:
					t.Fatalf("observer got %+v after the peer's state changed, want nothing", got)
				}
			})
		})
	}
}
