package daemon_test

import (
	"net/http"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/daemon"
)

// BenchmarkIdlePass is the CPU time of one reconcile pass with nothing
// changed (a key source read that finds nothing new) on this machine's CPU,
// as cpu-ns/pass; the wall time per op is the refresh interval, not work.
// An idle pass reads no socket and evaluates no policy, so its cost does
// not depend on the number of peers (make bench measures it in the guest
// at 64 and 4,096) and the in-memory kernel here changes nothing.
func BenchmarkIdlePass(b *testing.B) {
	e, _, _ := steadyEnv(b, 100*time.Microsecond)
	idlePasses(b, e.d, func(what string, cond func() bool) { e.waitFor(what, cond) })
}

// BenchmarkIdlePassFleet is BenchmarkIdlePass with N steady sessions
// ($AOKEYD_IDLE_PEERS, default 4096) and every metric series created (one
// scrape), as make bench's daemon item measures it in the guest: key
// source reads every 20ms, the sessions' steady re-reads and full passes
// out of the way. What the process spends between the passes (the GC, the
// rotation machines' timers) counts as the passes', as it does there.
func BenchmarkIdlePassFleet(b *testing.B) {
	n := envPeers(b, "AOKEYD_IDLE_PEERS", 4096)
	f := newMetricsFleet(b, n, 20*time.Millisecond, time.Hour)
	f.scrape(b, &discardWriter{header: http.Header{}})
	idlePasses(b, f.d, func(what string, cond func() bool) {
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("not within 1m: %s", what)
			}
		}
	})
}

// idlePasses reports d's CPU time per idle pass over b.N of them, once 20
// idle passes ran in a row without a full one.
func idlePasses(b *testing.B, d *daemon.Daemon, waitFor func(string, func() bool)) {
	for run := 0; run < 20; {
		idle, full := d.Passes()
		waitFor("an idle pass", func() bool { i, _ := d.Passes(); return i > idle })
		if _, f := d.Passes(); f != full {
			run = 0
			continue
		}
		run++
	}
	idle0, full0 := d.Passes()
	// The idle passes alone, without the set-up (what the bench's -cpuprofile holds).
	defer cpuProfile(b, "AOKEYD_IDLE_CPU_PROFILE")()
	c0 := cpuNow(b)
	b.ResetTimer()
	for {
		if idle, _ := d.Passes(); idle >= idle0+uint64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond) // the benchmark's own wake-ups: 200/s at most
	}
	b.StopTimer()
	c1 := cpuNow(b)
	idle1, full1 := d.Passes()
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

// cpuProfile starts a CPU profile into the file the environment variable
// env names, and returns what stops it (nothing to stop without one).
func cpuProfile(b *testing.B, env string) (stop func()) {
	b.Helper()
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
