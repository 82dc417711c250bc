package daemon_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// slowReadSocket is a listening socket whose TCP_AO_GET_KEYS takes delay
// once armed (a listener with thousands of keys on a slow CPU) and counts
// its reads.
type slowReadSocket struct {
	tcpao.Socket
	armed *atomic.Bool
	reads *atomic.Int64
	delay time.Duration
}

func (s slowReadSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	if s.armed.Load() {
		s.reads.Add(1)
		time.Sleep(s.delay)
	}
	return s.Socket.Keys(f)
}

// TestSessionPassesPaced: passes that only session events ask for (a roll
// done on each of a fleet's peers, one after another) are paced by what
// the last full pass cost: a listener whose read takes 200 ms is read a
// few times over two seconds of events, not back to back (which left the
// reconcile goroutine on a CPU for the whole of a 1,024-peer roll), and
// the last event is still served: a listener key deleted behind the
// daemon's back is back within a second of it.
func TestSessionPassesPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		var reads atomic.Int64
		const delay = 200 * time.Millisecond
		f := newRevokeFleet(t, fleetOptions{n: 4, listener: func(s tcpao.Socket) tcpao.Socket {
			return slowReadSocket{Socket: s, armed: &armed, reads: &reads, delay: delay}
		}})
		lis := f.lis
		armed.Store(true)
		f.d.SessionEvent() // one full pass: its cost paces the next
		synctest.Wait()
		time.Sleep(time.Second)
		reads.Store(0)
		const events, gap = 200, 10 * time.Millisecond
		for range events {
			f.d.SessionEvent()
			time.Sleep(gap)
		}
		// Back to back, a pass starts every 200 ms: ten in two seconds.
		// Paced (the next starts no sooner than eight times the last one's
		// cost after it, at most a second), two or three.
		t.Logf("%d listener reads over %d session events", reads.Load(), events)
		if n := reads.Load(); n > 4 {
			t.Errorf("the listener was read %d times over %d session events in %v: passes not paced by their cost (%v a read)", n, events, events*gap, delay)
		}
		keys, err := lis.Keys(tcpao.KeyFilter{})
		if err != nil || len(keys) != 2 {
			t.Fatalf("listener keys %d, %v; want k1 and k2", len(keys), err)
		}
		if err := lis.DelKey(tcpao.DelKey{KeyRef: keys[0].KeyRef}); err != nil {
			t.Fatal(err)
		}
		f.d.SessionEvent()
		start := time.Now()
		for len(keyIDs(t, lis)) != 2 {
			if time.Since(start) > time.Second+delay {
				t.Fatalf("the listener's k2, deleted behind the daemon's back, not back within %v of the last session event", time.Second+delay)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
