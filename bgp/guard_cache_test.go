package bgp

import (
	"context"
	"errors"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp/sockets"
)

// answerSpeaker delivers scripted events and answers Peer with what the
// test set, counting the questions (each one RPC to a real speaker).
type answerSpeaker struct {
	fakeSpeaker
	mu      sync.Mutex
	answer  PeerInfo
	queries int
	// unmanaged makes the tracker's Managed say no.
	unmanaged atomic.Bool
}

func (s *answerSpeaker) Peer(context.Context, peer.Key) (PeerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	return s.answer, nil
}

func (s *answerSpeaker) set(p PeerInfo) {
	s.mu.Lock()
	s.answer = p
	s.mu.Unlock()
}

func (s *answerSpeaker) asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// TestGuardAnswersFromTrackedSessions: the guard, asking the tracker,
// costs the speaker nothing while the tracker can vouch for the session
// (stream synced and quiet), asks the speaker about the neighbor when it
// cannot (before the first sync, after the stream broke, for a neighbor it
// does not hold), and a drop seen through the stream during a step still
// fails the step.
func TestGuardAnswersFromTrackedSessions(t *testing.T) {
	est := up(0, t0, 40000)
	reup := up(1, t0.Add(60e9), 40001)
	idle := PeerInfo{Neighbor: nbr, State: StateIdle}
	for _, tc := range []struct {
		name string
		// prepare runs after the tracker started, before the step.
		prepare func(sp *answerSpeaker)
		// during runs inside the step.
		during    func(sp *answerSpeaker, disc *fakeDisc)
		wantAsked int
		wantErr   error
	}{
		{name: "synced and quiet: from the cache",
			prepare: func(sp *answerSpeaker) { sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}} }},
		{name: "not yet synced: asks the speaker", prepare: func(*answerSpeaker) {}, wantAsked: 2},
		{name: "stream lost: asks the speaker",
			prepare: func(sp *answerSpeaker) {
				sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
				sp.ch <- Event{Kind: EventLost}
			}, wantAsked: 2},
		{name: "resynced after a loss: from the cache again",
			prepare: func(sp *answerSpeaker) {
				sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
				sp.ch <- Event{Kind: EventLost}
				sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
			}},
		{name: "neighbor not tracked: asks the speaker",
			prepare: func(sp *answerSpeaker) { sp.ch <- Event{Kind: EventSync} }, wantAsked: 2},
		{name: "event ignored while unmanaged: asks the speaker",
			prepare: func(sp *answerSpeaker) {
				sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
				synctest.Wait()
				sp.unmanaged.Store(true)
				sp.ch <- Event{Kind: EventState, Peer: idle}
				synctest.Wait()
				sp.unmanaged.Store(false)
			}, wantAsked: 2},
		{name: "drop seen through the stream fails the step",
			prepare: func(sp *answerSpeaker) { sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}} },
			during: func(sp *answerSpeaker, _ *fakeDisc) {
				sp.set(idle)
				sp.ch <- Event{Kind: EventState, Peer: idle}
				synctest.Wait()
			}, wantAsked: 1, wantErr: ErrSessionDropped},
		{name: "re-established on another connection fails the step",
			prepare: func(sp *answerSpeaker) { sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}} },
			during: func(sp *answerSpeaker, disc *fakeDisc) {
				disc.mu.Lock()
				disc.conns[100] = []sockets.Ref{conn(100, 8, 179, 40001)}
				disc.mu.Unlock()
				sp.set(reup)
				sp.ch <- Event{Kind: EventState, Peer: idle}
				sp.ch <- Event{Kind: EventState, Peer: reup}
				synctest.Wait()
			}, wantErr: ErrSessionDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := &answerSpeaker{fakeSpeaker: fakeSpeaker{ch: make(chan Event, 4), pid: 100}, answer: est}
				disc := &fakeDisc{conns: map[int][]sockets.Ref{100: {conn(100, 7, 179, 40000)}}}
				tr := NewTracker(sp, disc, &nopObs{}, TrackerOptions{Managed: func(PeerInfo) bool { return !sp.unmanaged.Load() }})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- tr.Run(ctx) }()
				defer func() { cancel(); close(sp.ch); <-done }()
				synctest.Wait()
				tc.prepare(sp)
				synctest.Wait()
				g := NewGuard(tr, nil)
				ran := false
				err := step(ctx, g, nbrKey, "switch", func(context.Context) error {
					ran = true
					if tc.during != nil {
						tc.during(sp, disc)
					}
					return nil
				})
				if !ran {
					t.Fatalf("the step did not run: %v", err)
				}
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Errorf("Step: %v, want %v", err, tc.wantErr)
				}
				if got := sp.asked(); got != tc.wantAsked {
					t.Errorf("the speaker was asked %d times, want %d", got, tc.wantAsked)
				}
			})
		})
	}
}

type nopObs struct{}

func (nopObs) OnEstablished(context.Context, PeerInfo, SocketHandle) {}
func (nopObs) OnDown(context.Context, PeerInfo)                      {}
