package bgp

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
)

// TestTrackerRetriesSocketNotFound: a session the speaker lists as
// Established whose socket cannot be told yet (gobgpd's ListPeer gives no
// live ports, and a connection collision leaves two connections to the
// neighbor for a moment) is looked for again until it is found, not left
// without a socket until the speaker's next event for it, which a stable
// session never sends. A state change for the peer ends the search.
func TestTrackerRetriesSocketNotFound(t *testing.T) {
	est := PeerInfo{Neighbor: nbr, Local: local, State: StateEstablished}
	for _, tc := range []struct {
		name   string
		then   []Event // after the failed lookup, before the collision is resolved
		wantUp bool
	}{
		{"collision resolved", nil, true},
		{"peer went down meanwhile", []Event{{Kind: EventState, Peer: PeerInfo{Neighbor: nbr, State: StateIdle}}}, false},
		{"removed from the speaker's config", []Event{{Kind: EventSync}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := &fakeSpeaker{ch: make(chan Event), pid: 100}
				// The collision: the passive connection and the speaker's own.
				disc := &fakeDisc{conns: map[int][]sockets.Ref{100: {conn(100, 7, 179, 40000), conn(100, 8, 50000, 179)}}}
				obs := &recObs{calls: make(chan call, 16)}
				tr := NewTracker(sp, disc, obs, TrackerOptions{})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- tr.Run(ctx) }()
				defer func() {
					cancel()
					close(sp.ch)
					<-done
				}()

				sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
				synctest.Wait()
				if len(obs.calls) != 0 {
					t.Fatalf("handed over %+v with two connections to the neighbor", <-obs.calls)
				}
				for _, ev := range tc.then {
					sp.ch <- ev
				}
				synctest.Wait()
				// The collision's loser is closed.
				disc.mu.Lock()
				disc.conns[100] = disc.conns[100][:1]
				disc.mu.Unlock()
				time.Sleep(time.Minute)
				synctest.Wait()
				var got []call
				for len(obs.calls) > 0 {
					got = append(got, <-obs.calls)
				}
				switch {
				case tc.wantUp && (len(got) != 1 || got[0] != call{"up", nbr, 7}):
					t.Fatalf("observer got %+v, want the session on inode 7 once", got)
				case !tc.wantUp && len(got) != 0:
					t.Fatalf("observer got %+v after the peer's state changed, want nothing", got)
				}
			})
		})
	}
}
