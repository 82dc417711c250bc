package rotator

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestWakeBeforeFirstRun: a SetDesired that reaches a machine between
// Accepted registering it and its first run starting must not start a
// second run beside the first (two goroutines on one machine: the race
// detector's data race on the machine).
func TestWakeBeforeFirstRun(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	ctl := NewController(Options{Config: Config{Poll: time.Millisecond, Grace: time.Millisecond, Steady: time.Hour}})
	defer ctl.Close()
	d1 := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
	d2 := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(2)}
	for i := range 200 {
		p := pid(fmt.Sprintf("p%d", i))
		ctl.SetDesired(p, d1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				if j%2 == 0 {
					ctl.SetDesired(p, d2)
				} else {
					ctl.SetDesired(p, d1)
				}
			}
		}()
		if _, err := ctl.Accepted(p, newEstablished(a, b)); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		ctl.PeerDown(p)
	}
}
