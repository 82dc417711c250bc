package daemon_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkIdlePass is the CPU time of one reconcile pass with nothing
// changed (a key source read that finds nothing new) on this machine's CPU,
// as cpu-ns/pass; the wall time per op is the refresh interval, not work.
// An idle pass reads no socket and evaluates no policy, so its cost does
// not depend on the number of peers (make bench measures it in the guest
// at 64 and 4,096) and the in-memory kernel here changes nothing.
func BenchmarkIdlePass(b *testing.B) {
	e, _, _ := steadyEnv(b, 100*time.Microsecond)
	// Start once 20 idle passes ran in a row without a full one.
	for run := 0; run < 20; {
		idle, full := e.d.Passes()
		e.waitFor("an idle pass", func() bool { i, _ := e.d.Passes(); return i > idle })
		if _, f := e.d.Passes(); f != full {
			run = 0
			continue
		}
		run++
	}
	idle0, full0 := e.d.Passes()
	c0 := cpuNow(b)
	b.ResetTimer()
	for {
		if idle, _ := e.d.Passes(); idle >= idle0+uint64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond) // the benchmark's own wake-ups: 200/s at most
	}
	b.StopTimer()
	c1 := cpuNow(b)
	idle1, full1 := e.d.Passes()
	b.ReportMetric(float64(c1-c0)/float64(idle1-idle0), "cpu-ns/pass")
	b.ReportMetric(float64(full1-full0), "full-passes")
}

// cpuNow is the process's user+system CPU time in ns.
func cpuNow(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
