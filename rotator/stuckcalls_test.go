package rotator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestStuckStepHoldsUpNoCaller: while one peer's step never returns,
// PeerDown, Accepted and Exclusive on that peer return at once (Exclusive
// reports that its function did not run), the other peers keep rolling,
// and the stuck peer's status says what its new socket waits for. Once
// the stuck step returns, the new socket is cleaned and rolled by a fresh
// machine, which alone touches it.
func TestStuckStepHoldsUpNoCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		g := &stuckGuard{stuck: pid("s"), release: make(chan struct{})}
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: 20 * time.Millisecond, Steady: time.Hour}, Guard: g})
		defer ctl.Close()
		release := sync.OnceFunc(func() { close(g.release) })
		defer release() // runs before Close
		both := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
		aOnly := Desired{Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)}
		socks := map[PeerID]*testSock{}
		for _, p := range []PeerID{pid("p1"), pid("p2"), pid("s")} {
			ctl.SetDesired(p, both)
			socks[p] = newEstablished(a, b)
			if _, err := ctl.Accepted(p, socks[p]); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		ctl.SetDesired(pid("s"), aOnly) // s's retire step sticks in its guard
		if !testkit.Until(time.Second, func() bool { return g.blocked.Load() == 1 }) {
			t.Fatal("s not stuck in its guard")
		}
		keysOf := func(s *testSock) int { ks, _ := s.Keys(tcpao.KeyFilter{}); return len(ks) }

		// returns runs call on a goroutine of its own and reports whether
		// it returned within d (0: before the bubble settled).
		returns := func(what string, d time.Duration, call func()) {
			t.Helper()
			done := make(chan struct{})
			go func() { defer close(done); call() }()
			time.Sleep(d)
			synctest.Wait()
			select {
			case <-done:
			default:
				t.Errorf("%s waits for s's stuck step", what)
			}
		}
		ran := false
		returns("Exclusive(s) past its context's deadline", time.Second, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if ctl.Exclusive(ctx, pid("s"), aOnly, func(tcpao.Socket) { ran = true }) {
				t.Error("Exclusive(s) reported its function ran")
			}
		})
		returns("PeerDown(s)", 0, func() { ctl.PeerDown(pid("s")) })
		fresh := newEstablished(a, b)
		returns("Accepted(s)", 0, func() {
			if _, err := ctl.Accepted(pid("s"), fresh); err != nil {
				t.Errorf("Accepted(s): %v", err)
			}
		})
		// The other peers roll meanwhile.
		ctl.SetDesired(pid("p1"), aOnly)
		if !testkit.Until(time.Second, func() bool { return keysOf(socks[pid("p1")]) == 1 }) {
			t.Errorf("p1 did not roll while s is stuck; status %+v", ctl.Status())
		}
		for _, st := range ctl.Status() {
			if want := "the previous machine's step (test guard: s retire)"; st.Peer == pid("s") && st.Waiting != want {
				t.Errorf("s's new machine waits for %q, want %q", st.Waiting, want)
			}
		}
		if ran {
			t.Error("Exclusive's function ran on s while its step was stuck")
		}
		if n := keysOf(fresh); n != 2 {
			t.Errorf("s's new socket has %d keys before the stuck step returned, want 2 (untouched)", n)
		}
		release()
		if !testkit.Until(time.Second, func() bool { return keysOf(fresh) == 1 }) {
			t.Errorf("s's new socket not rolled once the stuck step returned; status %+v", ctl.Status())
		}
	})
}

// ctxGuard's Before waits, like a speaker that does not answer, until the
// step's context ends, and records why it returned.
type ctxGuard struct {
	mu   sync.Mutex
	errs []error
}

func (g *ctxGuard) Before(ctx context.Context, _ PeerID, _ Step) error {
	<-ctx.Done()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, ctx.Err())
	return ctx.Err()
}

func (g *ctxGuard) After(context.Context, PeerID, Step) error { return nil }

// TestStoppedMachineCancelsGuard: the session guard's question for a step
// carries the machine's context, so stopping the machine (PeerDown here;
// Accepted and Close alike) cancels a question the speaker does not
// answer, and the machine ends.
func TestStoppedMachineCancelsGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		g := &ctxGuard{}
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: 20 * time.Millisecond, Steady: time.Hour}, Guard: g})
		defer ctl.Close()
		ctl.SetDesired(pid("s"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)})
		if _, err := ctl.Accepted(pid("s"), newEstablished(a, b)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctl.SetDesired(pid("s"), Desired{Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)})
		time.Sleep(time.Second) // past the grace period: the retire step waits in the guard
		done := ctl.PeerDown(pid("s"))
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the machine still waits in its guard after PeerDown")
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.errs) != 1 || !errors.Is(g.errs[0], context.Canceled) {
			t.Errorf("guard returned with %v, want one context.Canceled", g.errs)
		}
	})
}
