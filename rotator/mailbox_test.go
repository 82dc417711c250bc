package rotator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"

	"github.com/aokeyd/aokeyd/tcpao"
)

// stuckGuard never returns from Before for one peer until released (it
// heeds nothing else, like a call stuck in the kernel or a speaker that
// never answers).
type stuckGuard struct {
	stuck   PeerID
	release chan struct{}
	blocked atomic.Int32
}

func (g *stuckGuard) Before(_ context.Context, p PeerID, _ Step) error {
	if p == g.stuck {
		g.blocked.Add(1)
		defer g.blocked.Add(-1)
		<-g.release
	}
	return nil
}

func (g *stuckGuard) After(context.Context, PeerID, Step) error { return nil }

func (g *stuckGuard) WaitingFor(p PeerID, s Step) string {
	return "test guard: " + p.VRF + " " + string(s)
}

// TestStuckStepHoldsUpNoOther: while one peer's step never returns,
// SetDesired and Status answer at once for every peer (the stuck one
// included), the other peers complete their roll on schedule, Exclusive
// runs on another peer, and the stuck peer's status names what it waits
// for. Once released, the stuck peer takes the latest desired state.
func TestStuckStepHoldsUpNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		g := &stuckGuard{stuck: pid("s"), release: make(chan struct{})}
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: 20 * time.Millisecond, Steady: time.Hour}, Guard: g})
		defer ctl.Close()
		release := sync.OnceFunc(func() { close(g.release) })
		defer release() // runs before Close
		both := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
		aOnly := Desired{Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)}
		peers := []PeerID{pid("p1"), pid("p2"), pid("p3"), pid("s")}
		socks := map[PeerID]*testSock{}
		for _, p := range peers {
			ctl.SetDesired(p, both)
			socks[p] = newEstablished(a, b)
			if _, err := ctl.Accepted(p, socks[p]); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		// Every peer retires b: a guarded step, which never returns for s.
		start := time.Now()
		for _, p := range peers {
			ctl.SetDesired(p, aOnly)
		}
		waitUntil := func(what string, within time.Duration, cond func() bool) {
			t.Helper()
			if !testkit.Until(within, cond) {
				t.Fatalf("not within %s: %s; status %+v", within, what, ctl.Status())
			}
		}
		keysOf := func(p PeerID) int { ks, _ := socks[p].Keys(tcpao.KeyFilter{}); return len(ks) }
		waitUntil("the other peers' rolls", time.Second, func() bool {
			return keysOf(pid("p1")) == 1 && keysOf(pid("p2")) == 1 && keysOf(pid("p3")) == 1
		})
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("the other peers' rolls took %s, want the grace period (20ms) and a few polls", took)
		}
		waitUntil("s stuck in its guard", time.Second, func() bool { return g.blocked.Load() == 1 })

		// Producers and readers do not wait for s.
		ctl.SetDesired(pid("s"), both)
		ctl.SetDesired(pid("s"), aOnly)
		var ran bool
		if !ctl.Exclusive(context.Background(), pid("p1"), aOnly, func(tcpao.Socket) { ran = true }) || !ran {
			t.Fatal("Exclusive on p1 did not run while s is stuck")
		}
		for _, st := range ctl.Status() {
			switch {
			case st.Peer == pid("s"):
				if want := "test guard: s retire"; st.Waiting != want {
					t.Errorf("s waits for %q, want %q", st.Waiting, want)
				}
			case st.State != StateSteady || st.Rolls != 1 || st.Waiting != "":
				t.Errorf("%s: state %s rolls %d waiting %q, want steady after one roll", st.Peer, st.State, st.Rolls, st.Waiting)
			}
		}
		if keysOf(pid("s")) != 2 {
			t.Errorf("s has %d keys, want both until its step runs", keysOf(pid("s")))
		}

		release() // s's guard returns, and so does every later call
		waitUntil("s's roll after release", time.Second, func() bool { return keysOf(pid("s")) == 1 })
	})
}

// TestWakeWithTheSameTargetReadsNothing: a new desired state that keeps a
// rolling peer's target (the old key's accept end, reached by the whole
// fleet at once) does not make the peer read its socket before the step
// it waits for; one with another target, or an Exclusive call, steps at
// once.
func TestWakeWithTheSameTargetReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: time.Hour, Steady: 24 * time.Hour}})
		defer ctl.Close()
		both := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
		aOnly := Desired{Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)}
		sock := newEstablished(a, b)
		ctl.SetDesired(pid("p"), both)
		if _, err := ctl.Accepted(pid("p"), sock); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctl.SetDesired(pid("p"), aOnly) // b is to go: after the grace period
		synctest.Wait()
		state := func() State { return ctl.Status()[0].State }
		reads := func() int { sock.mu.Lock(); defer sock.mu.Unlock(); return sock.reads }
		if state() != StateGrace {
			t.Fatalf("state %s, want %s", state(), StateGrace)
		}
		r0 := reads()
		for range 3 {
			ctl.SetDesired(pid("p"), aOnly)
			synctest.Wait()
		}
		if got := reads() - r0; got != 0 || state() != StateGrace {
			t.Errorf("three wake-ups with the same target in the grace period: %d reads, state %s; want 0 reads, %s", got, state(), StateGrace)
		}
		// An Exclusive call steps at once (its write is news).
		if !ctl.Exclusive(context.Background(), pid("p"), aOnly, func(tcpao.Socket) {}) {
			t.Fatal("Exclusive did not run")
		}
		synctest.Wait()
		if reads() == r0 {
			t.Error("no read after an Exclusive call")
		}
		// Another target re-plans at once: b back as the one to send with.
		r1 := reads()
		ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)})
		synctest.Wait()
		if reads() == r1 || state() == StateGrace {
			t.Errorf("a new target: %d reads, state %s; want a step at once", reads()-r1, state())
		}
	})
}
