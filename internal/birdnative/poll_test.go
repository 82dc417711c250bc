package birdnative

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/policy"
)

// frozenClock is a clock the test moves.
type frozenClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *frozenClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *frozenClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// With nothing applied, checked or submitted for a while, Run reads BIRD's
// protocols every idlePolls polls, not every poll: a route server's
// thousand protocols, read every second, cost BIRD a third of a CPU and
// aokeyd the parse (issue 52 item 2). Once a plan is submitted it reads
// every poll again (the mend's window: BIRD restarts protocols at a
// configure). The clock is the test's, frozen: on the old code every
// tick read.
func TestExecutorPollsSlowlyWhenIdle(t *testing.T) {
	e, fb := newTestExecutor(t)
	clk := &frozenClock{t: time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)}
	e.o.Now, e.o.Poll = clk.now, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(daemon.ExecOutcome) {}) }()
	defer func() { cancel(); <-done }()

	if !eventually(10*time.Second, func() bool { return fb.shows() >= 1 }) {
		t.Fatal("Run never read BIRD's protocols")
	}
	start := fb.shows()
	time.Sleep(15 * e.o.Poll) // ticks, the clock still
	if n := fb.shows() - start; n != 0 {
		t.Fatalf("idle, with the clock still: %d reads of BIRD's protocols over 15 polls, want none until idlePolls polls have passed", n)
	}
	clk.add(idlePolls * e.o.Poll)
	if !eventually(10*time.Second, func() bool { return fb.shows() >= start+1 }) {
		t.Fatal("idle: no read once idlePolls polls had passed")
	}
	start = fb.shows()
	e.Submit(nil) // a pass's submission: Run is hot
	if !eventually(10*time.Second, func() bool { return fb.shows() >= start+3 }) {
		t.Fatalf("after a submission: %d reads, want one every poll", fb.shows()-start)
	}
	clk.add(hotFor)
	time.Sleep(3 * e.o.Poll)
	start = fb.shows()
	time.Sleep(15 * e.o.Poll)
	if n := fb.shows() - start; n != 0 {
		t.Fatalf("hotFor after the submission: %d reads over 15 polls, want none", n)
	}
}

// TestRevokeDoesNotWaitForAPoll: a revoke's lists are applied while a
// poll's read of BIRD's protocols is still under way (a route server's
// thousand protocols take BIRD and aokeyd hundreds of ms in the guest),
// and the revoke's application reads no protocols itself. On the old
// code the poll and the application took turns in Run's one loop.
func TestRevokeDoesNotWaitForAPoll(t *testing.T) {
	e, fb := newTestExecutor(t)
	e.o.Poll = 10 * time.Millisecond
	gate := make(chan struct{})
	fb.mu.Lock()
	fb.showGate = gate
	fb.mu.Unlock()
	outcomes, stop := runGated(e)
	defer stop()
	defer close(gate) // first: the held read returns, and Run with it
	if !eventually(10*time.Second, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.held > 0 }) {
		t.Fatal("no poll started")
	}
	pl := execPlan(peer.KeyOf(netip.MustParseAddr("192.0.2.2"), ""), input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0}, 1)
	pl.Revoke = true
	e.Submit([]daemon.ExecPlan{pl})
	select {
	case o := <-outcomes:
		if o.ConfigureErr != nil || len(o.Failed) > 0 {
			t.Fatalf("outcome %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the revoke's lists were not applied while a poll's read was under way")
	}
}

// TestPollWaitsForAnApplication: while BIRD reconfigures (a configure
// not yet answered) the poll asks BIRD for no protocols; once it has
// answered, the polls go on (hot: every poll). On the old code the poll
// read BIRD's protocols every poll beside the configure.
func TestPollWaitsForAnApplication(t *testing.T) {
	e, fb := newTestExecutor(t)
	e.o.Poll = 10 * time.Millisecond
	gate := make(chan struct{})
	fb.mu.Lock()
	fb.configureGate = gate
	fb.mu.Unlock()
	asked := func() int { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.showsAsked }
	configures := func() int { return fb.count() }
	outcomes, stop := runGated(e)
	defer stop()
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	e.Submit([]daemon.ExecPlan{execPlan(peer.KeyOf(netip.MustParseAddr("192.0.2.2"), ""), input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0}, 1)})
	// The configure is asked (and held) once its file is written.
	if !eventually(10*time.Second, func() bool { return e.applying.Load() && configures() == 0 && asked() > 0 }) {
		t.Fatal("the application did not start")
	}
	time.Sleep(50 * time.Millisecond) // a poll that began before the application ends
	n := asked()
	time.Sleep(20 * e.o.Poll)
	if got := asked(); got != n {
		t.Errorf("%d reads of BIRD's protocols asked while it reconfigured, want none", got-n)
	}
	close(gate)
	released = true
	select {
	case <-outcomes:
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome")
	}
	if !eventually(10*time.Second, func() bool { return asked() > n+2 }) {
		t.Error("no polls after the application")
	}
}

// runGated runs e until stop, which waits for Run to return (a gate the
// test holds must be opened first); outcomes hears each application.
func runGated(e *Executor) (outcomes chan daemon.ExecOutcome, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	outcomes = make(chan daemon.ExecOutcome, 1)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(o daemon.ExecOutcome) { outcomes <- o }) }()
	return outcomes, func() { cancel(); <-done }
}
