package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// rollingBackend is a fakeBackend that reports roll steps.
type rollingBackend struct {
	fakeBackend
	mu  sync.Mutex
	got []RollsRequest
}

func (r *rollingBackend) Rolls(_ context.Context, req RollsRequest) (RollsReport, error) {
	r.mu.Lock()
	r.got = append(r.got, req)
	r.mu.Unlock()
	if req.Peer != "192.0.2.2" {
		return RollsReport{}, fmt.Errorf("peer %s: %w", req.Peer, ErrNotFound)
	}
	return RollsReport{Peer: req.Peer, Last: 9, Steps: []RollStep{{Seq: 9, At: time.Unix(100, 0).UTC(), Step: RollSwitched, State: "grace",
		Key: &KeyName{Chain: "core", Name: "k2", SendID: 2, RecvID: 102}}}}, nil
}

// GET /v1/rolls carries the request's peer, VRF, sequence number and wait
// (seconds, capped) to the backend, and its steps back; a backend without
// roll steps (an older daemon's) answers not found, a bad query invalid.
func TestRollsRoundTrip(t *testing.T) {
	b := &rollingBackend{}
	c, _ := serve(t, ServerOptions{Backend: b})
	ctx := context.Background()
	rep, err := c.Rolls(ctx, RollsRequest{Peer: "192.0.2.2", VRF: "red", After: 7, Wait: 1500 * time.Millisecond})
	if err != nil || rep.Last != 9 || len(rep.Steps) != 1 || rep.Steps[0].Step != RollSwitched || rep.Steps[0].Key.String() != "core/k2" {
		t.Fatalf("Rolls = %+v, %v", rep, err)
	}
	if _, err := c.Rolls(ctx, RollsRequest{Peer: "192.0.2.2", Wait: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	got := b.got
	b.mu.Unlock()
	if len(got) != 2 || got[0] != (RollsRequest{Peer: "192.0.2.2", VRF: "red", After: 7, Wait: 1500 * time.Millisecond}) || got[1].Wait != MaxRollsWait {
		t.Errorf("the backend was asked %+v", got)
	}
	for _, tc := range []struct {
		name string
		req  RollsRequest
		want error
	}{
		{"unknown peer", RollsRequest{Peer: "192.0.2.9"}, ErrNotFound},
		{"no peer", RollsRequest{}, ErrInvalid},
		{"not an address", RollsRequest{Peer: "secret-pasted-here"}, ErrInvalid},
		{"not a VRF name", RollsRequest{Peer: "192.0.2.2", VRF: "a b"}, ErrInvalid},
	} {
		if _, err := c.Rolls(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A short write timeout holds a request for half of it at most.
	short := &rollingBackend{}
	sc, _ := serve(t, ServerOptions{Backend: short, WriteTimeout: 10 * time.Second})
	if _, err := sc.Rolls(ctx, RollsRequest{Peer: "192.0.2.2", Wait: time.Minute}); err != nil || short.got[0].Wait != 5*time.Second {
		t.Errorf("with a 10s write timeout the backend was asked to wait %v (%v), want 5s", short.got, err)
	}
	old, _ := serve(t, ServerOptions{Backend: &fakeBackend{}})
	if _, err := old.Rolls(ctx, RollsRequest{Peer: "192.0.2.2"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a backend without roll steps: %v, want not found", err)
	}
}

// A roll ends with its completion (success), an abort or its session going
// down (failure); the other steps lead on.
func TestRollStepEnds(t *testing.T) {
	for _, tc := range []struct {
		k        RollStepKind
		ends, ok bool
	}{
		{RollStarted, false, false}, {RollAnnounced, false, false}, {RollSwitched, false, false},
		{RollCompleted, true, true}, {RollAborted, true, false}, {RollSessionDown, true, false},
		{RollReplanned, false, false}, {RollSessionUp, false, false},
	} {
		if ends, ok := tc.k.Ends(); ends != tc.ends || ok != tc.ok {
			t.Errorf("%s.Ends() = %v, %v; want %v, %v", tc.k, ends, ok, tc.ends, tc.ok)
		}
	}
}
