package testkit

import (
	"testing/synctest"
	"time"
)

// Until runs in a testing/synctest bubble and lets the bubble's goroutines
// work until cond holds; it reports false if cond still does not hold
// after limit of the bubble's clock. cond is checked only after
// synctest.Wait, when every goroutine of the bubble has done all it can
// without time passing: cond's answer is then the same on every run. While
// it does not hold, only time can change that, so the clock moves on by a
// millisecond (or to an earlier timer of the bubble). Outside a bubble
// Until panics (synctest.Wait does).
//
// It replaces wall-clock polling loops ("deadline := time.Now().Add(...)")
// in host tests: virtual time costs no wall time, and a condition that is
// never met fails at once instead of after the deadline.
func Until(limit time.Duration, cond func() bool) bool {
	for waited := time.Duration(0); ; waited += time.Millisecond {
		synctest.Wait()
		if cond() {
			return true
		}
		if waited >= limit {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}
