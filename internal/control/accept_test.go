package control

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// exhaustedListener fails every Accept with err until its deadline on
// the bubble's clock, as accept4 does while the process or the system is
// out of descriptors, then hands out chanListener's connections.
type exhaustedListener struct {
	*chanListener
	err   error
	until atomic.Int64 // UnixNano
	calls atomic.Int64 // failed Accepts
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if time.Now().UnixNano() < l.until.Load() {
		select {
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		l.calls.Add(1)
		return nil, l.err
	}
	return l.chanListener.Accept()
}

// The accept loop survives running out of descriptors: it retries with a
// backoff (no busy loop, a bounded delay), says so once rather than on
// every retry, serves again as soon as descriptors are free, and stops at
// once on Shutdown.
func TestAcceptBackoff(t *testing.T) {
	acceptErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", errno)}
	}
	tests := []struct {
		name string
		err  error
	}{
		{"EMFILE", acceptErr(syscall.EMFILE)},
		{"ENFILE", acceptErr(syscall.ENFILE)},
		{"EMFILE through a listener that wraps errors", fmt.Errorf("activated socket: %w", os.NewSyscallError("accept4", syscall.EMFILE))},
	}
	const exhausted = 30 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs testkit.SyncBuffer
				l := &exhaustedListener{chanListener: newChanListener(), err: tt.err}
				l.until.Store(time.Now().Add(exhausted).UnixNano())
				s := NewServer(ServerOptions{Backend: &fakeBackend{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				s.credOf = rootCred
				done := make(chan error, 1)
				go func() { done <- s.Serve(l) }()
				// A client connects while descriptors are out; its
				// connection waits in the backlog.
				served := make(chan time.Time, 1)
				go func() {
					_, err := l.clientAs(Cred{}).Health(context.Background())
					if err != nil {
						t.Errorf("health once descriptors are free: %v", err)
					}
					served <- time.Now()
				}()
				start := time.Now()
				var late time.Duration
				select {
				case at := <-served:
					late = at.Sub(start.Add(exhausted))
				case err := <-done:
					l.Close()
					<-served
					t.Fatalf("Serve gave up: %v", err)
				}
				if late < 0 || late > acceptBackoffMax {
					t.Errorf("served %v after descriptors were free, want within %v", late, acceptBackoffMax)
				}
				// Backoff, not a busy loop: from acceptBackoffMin doubling.
				if n, most := l.calls.Load(), int64(exhausted/acceptBackoffMax)+8; n > most {
					t.Errorf("%d failed accepts in %v, want at most %d", n, exhausted, most)
				}
				if n := strings.Count(logs.String(), "\n"); n > 2 {
					t.Errorf("%d log lines for one spell without descriptors, want one when it starts and one when it ends:\n%s", n, logs.String())
				}

				// Out of descriptors again: Shutdown stops Serve at once,
				// whatever the backoff.
				l.until.Store(time.Now().Add(time.Hour).UnixNano())
				go func() { _, _ = l.clientAs(Cred{}).Health(context.Background()) }()
				time.Sleep(10 * time.Second)
				synctest.Wait()
				stop := time.Now()
				_ = s.Shutdown(context.Background())
				if err := <-done; err != nil {
					t.Errorf("Serve: %v", err)
				}
				if d := time.Since(stop); d > 0 {
					t.Errorf("Serve returned %v after Shutdown, want at once", d)
				}
			})
		})
	}
}
