package rotator

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// TestWaitingMachineHasNoTimer: a machine that waits takes a place in its
// controller's queue of wake-ups, not a timer of its own (time.AfterFunc
// and its method value: 128 bytes a peer, about 1 MiB of the daemon's
// heap at 4,096 peers with the half-empty spans timer churn leaves).
func TestWaitingMachineHasNoTimer(t *testing.T) {
	const peers = 4096
	ctl := NewController(Options{})
	rs := make([]*runner, peers)
	for i := range rs {
		rs[i] = &runner{c: ctl, m: &machine{}} // halt may touch the machine (its wait's state)
	}
	ctl.wg.Add(peers) // each halt below ends its runner (finishLocked)
	read := func(ms *runtime.MemStats) {
		runtime.GC() // HeapAlloc: the live objects alone
		runtime.ReadMemStats(ms)
	}
	var before, after runtime.MemStats
	read(&before)
	for i, r := range rs {
		r.mu.Lock()
		r.waitLocked(time.Hour + time.Duration(i)*time.Second)
		r.mu.Unlock()
	}
	read(&after)
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	for _, r := range rs {
		r.halt()
	}
	ctl.Close()
	// The queue's slice: 8 bytes a peer, and what append left spare.
	if got := live / peers; got > 24 {
		t.Errorf("a waiting machine's wake-up keeps %d bytes of heap, want at most 24", got)
	}
}

// TestWakeupsWakeEachMachine: the controller's one timer wakes every
// waiting machine when it is due, whichever order they wait in; a machine
// stopped leaves the queue, and once every machine has stopped the timer
// is not armed.
func TestWakeupsWakeEachMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := NewController(Options{Config: Config{Steady: 10 * time.Second}})
		defer ctl.Close()
		var ps []PeerID
		for i := range 5 {
			k := mkKey(peerA, uint8(i+1), uint8(i+1), fmt.Sprint("key-", i))
			p := pid(fmt.Sprint("p", i))
			ps = append(ps, p)
			ctl.SetDesired(p, want(k))
			if _, err := ctl.Accepted(p, newEstablished(k)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i+1) * 1300 * time.Millisecond) // a later start, another due time
		}
		synctest.Wait()
		reads := func() (at []time.Time) {
			for _, p := range ps {
				ctl.mu.Lock()
				r := ctl.peers[p].run
				ctl.mu.Unlock()
				if r == nil {
					at = append(at, time.Time{})
					continue
				}
				at = append(at, r.status.Load().Counters.At)
			}
			return at
		}
		for round := range 3 {
			was := reads()
			time.Sleep(12 * time.Second) // a steady read each, with ±10% jitter
			synctest.Wait()
			for i, at := range reads() {
				if i == 0 && round == 2 {
					continue // stopped
				}
				if !at.After(was[i]) {
					t.Errorf("round %d: %s not read again (read at %v, before %v)", round, ps[i], at, was[i])
				}
			}
			if round == 1 {
				<-ctl.PeerDown(ps[0])
			}
		}
		ctl.wake.mu.Lock()
		n := len(ctl.wake.q)
		ctl.wake.mu.Unlock()
		if n != len(ps)-1 {
			t.Errorf("%d machines waiting, want %d", n, len(ps)-1)
		}
		ctl.Close()
		ctl.wake.mu.Lock()
		n, armed := len(ctl.wake.q), ctl.wake.armed
		ctl.wake.mu.Unlock()
		if n != 0 || armed != noWake {
			t.Errorf("after Close: %d waiting, timer armed for %d", n, armed)
		}
	})
}
