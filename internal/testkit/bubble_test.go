package testkit

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   time.Duration // cond holds once a timer this long has fired; 0: never, <0: from the start
		limit   time.Duration
		want    bool
		elapsed time.Duration // on the bubble's clock
	}{
		{name: "already true", after: -1, limit: time.Second, want: true, elapsed: 0},
		{name: "true after a timer", after: 3 * time.Second, limit: 10 * time.Second, want: true, elapsed: 3 * time.Second},
		{name: "never true", limit: 2 * time.Second, want: false, elapsed: 2 * time.Second},
		{name: "true only after the limit", after: 5 * time.Second, limit: time.Second, want: false, elapsed: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var done atomic.Bool
				switch {
				case tc.after < 0:
					done.Store(true)
				case tc.after > 0:
					timer := time.AfterFunc(tc.after, func() { done.Store(true) })
					defer timer.Stop()
				}
				start := time.Now()
				got := Until(tc.limit, done.Load)
				if got != tc.want || time.Since(start) != tc.elapsed {
					t.Errorf("Until = %t after %v of the bubble's clock, want %t after %v", got, time.Since(start), tc.want, tc.elapsed)
				}
			})
		})
	}
}
