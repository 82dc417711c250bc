package daemon_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/tcpao"
)

// passWatchSocket notes, around each delete on a session, whether a full
// reconcile pass ran meanwhile (the daemon's own pass counter).
type passWatchSocket struct {
	tcpao.Socket
	d      func() *daemon.Daemon
	during *atomic.Int64
	delay  time.Duration
}

func (s passWatchSocket) DelKey(dk tcpao.DelKey) error {
	_, f0 := s.d().Passes()
	time.Sleep(s.delay) // the kernel's RCU grace period, as slowDelSocket's
	err := s.Socket.DelKey(dk)
	if _, f1 := s.d().Passes(); f1 != f0 {
		s.during.Add(int64(f1 - f0))
	}
	return err
}

// TestRevokeHoldsFullPasses: while a revoke works on the sessions, the
// reconcile loop runs no full pass, though the revocation's record
// changed its inputs and the key source's reads wake it: the revoke gave
// every peer it covers its desired state itself, and a pass's desired
// state of every peer, listener read and plan took the CPU the revoke
// needs (a full pass was 0.5 of a 1,024-peer revoke's 4.4 CPU-seconds in
// the guest, docs/performance.md). The first pass after the revoke is
// full.
func TestRevokeHoldsFullPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		var during atomic.Int64
		var f *revokeFleet
		f = newRevokeFleet(t, fleetOptions{n: n, perPeer: true, refresh: 5 * time.Millisecond, session: func(s tcpao.Socket) tcpao.Socket {
			return passWatchSocket{Socket: s, d: func() *daemon.Daemon { return f.d }, during: &during, delay: 100 * time.Millisecond}
		}})
		synctest.Wait()
		during.Store(0)
		revokeK1(t, f, "peer ", control.ActionForcedReplaced, n)
		if p := during.Load(); p != 0 {
			t.Errorf("%d full reconcile passes ran while the revoke deleted the sessions' key; want none", p)
		}
		_, f0 := f.d.Passes()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, f1 := f.d.Passes(); f1 == f0 {
			t.Errorf("no full pass within 1s after the revoke; want the one it asks for")
		}
	})
}
