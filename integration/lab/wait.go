package lab

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// DefaultEvery is how often Poll looks when Every is zero.
const DefaultEvery = 200 * time.Millisecond

// ProcessStart bounds the wait for a process started in the guest to be
// ready (its pid file, its control socket or vty, its listener). It is
// not a timing assumption: the waits poll for the event and go on as
// soon as it is there, in a second or two on a quiet guest. It holds on
// an emulated CPU with the host's two cores kept busy by a compile,
// where a start took over 30 s (issue 47: bgpd's pid file and vty).
const ProcessStart = 2 * time.Minute

// Cond is one look at the awaited state. done reports that it holds; when
// it does not, detail says what was seen instead (the last detail is kept
// in the TimeoutError). A non-nil err ends the wait at once with err.
type Cond func() (done bool, detail string, err error)

// Poll is one bounded wait on real time.
type Poll struct {
	What    string        // what is awaited, for the error
	Timeout time.Duration // how long to wait at most
	Every   time.Duration // how often to look (DefaultEvery if zero)
}

// TimeoutError is the error of a Poll that ran out of time.
type TimeoutError struct {
	What  string
	After time.Duration
	Last  string // the last detail the condition gave
}

func (e *TimeoutError) Error() string {
	if e.Last == "" {
		return fmt.Sprintf("timed out after %v waiting for %s", e.After, e.What)
	}
	return fmt.Sprintf("timed out after %v waiting for %s: %s", e.After, e.What, e.Last)
}

// Wait calls cond, at once and then every p.Every, until it is done (nil),
// returns an error (that error, wrapped with what was awaited), ctx ends
// (ctx's error) or p.Timeout passes (a *TimeoutError).
func (p Poll) Wait(ctx context.Context, cond Cond) error {
	every := p.Every
	if every <= 0 {
		every = DefaultEvery
	}
	deadline := time.Now().Add(p.Timeout)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		done, detail, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", p.What, err)
		}
		if done {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &TimeoutError{What: p.What, After: p.Timeout, Last: detail}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Eventually waits up to timeout for cond to hold, looking every
// DefaultEvery, and fails the test with the last detail cond gave if it
// does not.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	if err := Within(timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Within is Eventually that returns the timeout instead of failing the
// test, for a test that reports or tolerates it itself.
func Within(timeout time.Duration, what string, cond func() (ok bool, detail string)) error {
	return Poll{What: what, Timeout: timeout}.Wait(context.Background(), func() (bool, string, error) {
		ok, detail := cond()
		return ok, detail, nil
	})
}

// All runs fn(0) to fn(n-1) at once and waits for every call: starting a
// lab's routers side by side, so that a busy guest's process start-up
// latencies overlap instead of adding up. A call that fails the test
// (t.Fatal in a helper it calls ends only its own goroutine) stops the
// test once every call returned.
func All(t testing.TB, n int, fn func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
