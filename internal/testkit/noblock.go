package testkit

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// NoBlock runs f and fails the test when f has not returned within limit.
// It is for code that must not block on a file: a reader that opens a
// FIFO blocking waits for a writer forever, and a goroutine blocked in
// open(2) is not durably blocked, so a synctest bubble cannot see it: the
// limit is real time. On the deadline it opens each of fifos for writing
// (and closes it), so that the blocked f gets a writer and EOF and
// returns, before the test fails.
func NoBlock(t testing.TB, limit time.Duration, fifos []string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return
	case <-time.After(limit):
	}
	for range 200 {
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		select {
		case <-done:
			t.Fatalf("still blocked after %v: it waits on a FIFO (%v)", limit, fifos)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("still blocked after %v, and opening %v for writing did not free it", limit, fifos)
}
