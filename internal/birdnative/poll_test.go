package birdnative

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/daemon"
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
