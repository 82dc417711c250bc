package rotator

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleMachinesHoldNoGoroutine: a machine that waits (for its next
// poll, its steady re-read or a wake) holds no goroutine and so no stack:
// at route-server scale one goroutine per peer was most of the daemon's
// memory (4,103 goroutines, 34.6 MiB of stacks at 4,096 peers). Machines
// still step on their timers and on SetDesired afterwards.
func TestIdleMachinesHoldNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		// No keepalive probes: the peers stay silent, so the machines poll.
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: 20 * time.Millisecond, Steady: time.Minute, NoPeerProbe: true}})
		defer ctl.Close()
		base := runtime.NumGoroutine()
		both := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
		socks := make([]*testSock, n)
		for i := range n {
			p := pid(fmt.Sprintf("p%d", i))
			ctl.SetDesired(p, both)
			socks[i] = newEstablished(a, b)
			if _, err := ctl.Accepted(p, socks[i]); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if g := runtime.NumGoroutine() - base; g > 4 {
			t.Fatalf("%d machines waiting hold %d goroutines, want none", n, g)
		}
		// Steady re-reads still run on their timers.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		for _, st := range ctl.Status() {
			if st.Counters.At.Before(time.Now().Add(-time.Minute - 10*time.Second)) {
				t.Fatalf("%s last read at %s, want a steady re-read within the last minute (now %s)", st.Peer, st.Counters.At, time.Now())
			}
		}
		// A new desired state still wakes every machine: each announces
		// key 2 (RNext_key) and polls for the peer to send with it.
		to2 := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}
		for i := range n {
			ctl.SetDesired(pid(fmt.Sprintf("p%d", i)), to2)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		for _, st := range ctl.Status() {
			if st.State != StateAnnounced || st.RNext != ID(2) || st.AnnouncedFrom != ID(1) {
				t.Fatalf("%s %s rnext %v (announced from %v) after SetDesired to key 2, want announced with rnext 2 from 1 (the key the peer sends with until it takes 2)",
					st.Peer, st.State, st.RNext, st.AnnouncedFrom)
			}
		}
		if g := runtime.NumGoroutine() - base; g > 4 {
			t.Fatalf("polling, %d machines hold %d goroutines, want none", n, g)
		}
	})
}
