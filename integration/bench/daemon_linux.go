//go:build linux

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// fleetEnv is one fleet with its key source, speaker and policy.
type fleetEnv struct {
	f   *fleet
	src *fleetSource
	sp  *bgptest.Speaker
	pol *policy.Policy
}

// running is one started daemon.
type running struct {
	log    *slog.Logger
	d      *daemon.Daemon
	w      *watched
	reg    prometheus.Gatherer // what aokeyd serves to a protobuf scrape; nil: metrics off
	scrape http.Handler        // aokeyd's metrics handler; nil: metrics off
	cancel context.CancelFunc
	done   chan error
}

type daemonOpts struct {
	resync  time.Duration // full passes (0: the daemon's default)
	refresh time.Duration // key source reads; a read finding nothing new runs an idle pass
	steady  time.Duration // steady sessions' re-reads (0: the rotator's default)
	poll    time.Duration
	metrics bool
}

// scrapeRuns is how many scrapes after the first the daemon item times
// (their median is its figure).
const scrapeRuns = 3

func (r *runner) startDaemon(e *fleetEnv, o daemonOpts) (*running, error) {
	w := newWatched(e.f)
	var m *metrics.Metrics
	var reg prometheus.Gatherer
	var scrape http.Handler
	if o.metrics {
		var err error
		// aokeyd's default set (metrics.per_key off: at most 8 series a
		// peer), what issue 52's memory and idle-pass targets are for.
		if m, err = metrics.New(prometheus.NewRegistry(), metrics.Options{}); err != nil {
			return nil, fmt.Errorf("bench: metrics: %w", err)
		}
		reg, scrape = m.Gatherer(), m.Handler()
	}
	d, err := daemon.New(daemon.Options{
		Policy: e.pol, Keys: keystore.NewCache(e.src, keystore.CacheOptions{}), Source: e.src,
		Speaker: e.sp, Discoverer: e.f.disc, ListenPort: e.f.port,
		// Grace short: a freshly accepted socket whose only change is
		// ao_required goes through a grace period before it is steady.
		Rotator:   rotator.Config{Poll: o.poll, Steady: o.steady, Grace: time.Second},
		Resync:    o.resync,
		Refresh:   o.refresh,
		OptMemMax: func() (int, error) { return r.limit, nil },
		Logger:    slog.New(minLevel{r.log.Handler(), slog.LevelWarn}).With("part", "daemon"),
		Metrics:   m,
		SocketOf:  w.socketOf,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: daemon: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{log: r.log, d: d, w: w, reg: reg, scrape: scrape, cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- d.Run(ctx) }()
	return run, nil
}

func (run *running) stop() error {
	run.cancel()
	select {
	case err := <-run.done:
		return err
	case <-time.After(5 * time.Minute):
		return errors.New("bench: daemon did not stop within 5m")
	}
}

// waitTakeover waits until the daemon has touched every accepted socket and
// its status shows every peer's rotation steady.
func (run *running) waitTakeover(ctx context.Context, n int) error {
	if err := waitUntil(ctx, 10*time.Minute, "the daemon to take over every session", func() (bool, error) {
		return run.w.touchedCount() >= n, nil
	}); err != nil {
		return err
	}
	last := time.Now()
	return waitUntil(ctx, 5*time.Minute, "every peer steady", func() (bool, error) {
		st, err := run.d.Status(ctx, "")
		if err != nil {
			return false, err
		}
		states := map[string]int{}
		for _, p := range st.Peers {
			states[p.Rotation.State+"/"+p.SessionState]++
		}
		if states[string(rotator.StateSteady)+"/established"] == n {
			return true, nil
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			run.log.Warn("waiting for every peer steady", "states", fmt.Sprint(states))
		}
		return false, nil
	})
}

// bringUp builds a fleet of n peers with k keys each, starts a daemon,
// waits for it to install the listener's keys, connects the peers and waits
// for the takeover. It returns the started daemon and the two spans.
func (r *runner) bringUp(ctx context.Context, n, k int, o daemonOpts) (*fleetEnv, *running, [2]int64, error) {
	var spans [2]int64
	keys, err := r.fleetKeys(k, time.Now())
	if err != nil {
		return nil, nil, spans, err
	}
	e := &fleetEnv{src: &fleetSource{keys: keys}, sp: newFleetSpeaker(n)}
	if e.pol, err = fleetPolicy(n); err != nil {
		e.src.zero()
		return nil, nil, spans, err
	}
	if e.f, err = r.newFleet(ctx, n); err != nil {
		e.src.zero()
		return nil, nil, spans, err
	}
	fail := func(run *running, err error) (*fleetEnv, *running, [2]int64, error) {
		if run != nil {
			err = errors.Join(err, run.stop())
		}
		e.close()
		return nil, nil, spans, err
	}
	t0 := time.Now()
	run, err := r.startDaemon(e, o)
	if err != nil {
		return fail(nil, err)
	}
	if err := waitUntil(ctx, 10*time.Minute, "the daemon to install the listener's keys", func() (bool, error) {
		c, err := countKeys(e.f.lnSock, -1)
		return c == n*k, err
	}); err != nil {
		return fail(run, err)
	}
	spans[0] = int64(time.Since(t0))
	r.log.Info("daemon installed the listener's keys", "peers", n, "keys", n*k, "took", time.Duration(spans[0]))
	t1 := time.Now()
	if err := e.f.connect(ctx, keys, 0, e.sp); err != nil {
		return fail(run, err)
	}
	r.log.Info("fleet connected", "peers", n, "took", time.Since(t1))
	if err := run.waitTakeover(ctx, n); err != nil {
		return fail(run, err)
	}
	spans[1] = int64(time.Since(t1))
	r.log.Info("daemon took every session over", "peers", n, "took", time.Duration(spans[1]))
	return e, run, spans, nil
}

func (e *fleetEnv) close() {
	e.f.close()
	e.src.zero()
}

// raiseNoFile lifts RLIMIT_NOFILE to at least n descriptors.
func raiseNoFile(n uint64) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("bench: getrlimit: %w", err)
	}
	if l.Cur >= n {
		return nil
	}
	l.Cur = n
	l.Max = max(l.Max, n)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("bench: setrlimit(RLIMIT_NOFILE, %d): %w", n, err)
	}
	return nil
}

// rss is the process's resident set size in bytes (VmRSS).
func rss() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}

// settled returns RSS and the Go heap in use after a GC that gives freed
// memory back to the OS.
func settled() (rssB, heap int64, err error) {
	rssB, heap, _, _, err = settledAll()
	return rssB, heap, err
}

// settledAll is settled with the goroutine stacks' memory and count.
func settledAll() (rssB, heap, stacks int64, goroutines int, err error) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rssB, err = rss()
	return rssB, int64(ms.HeapInuse), int64(ms.StackInuse), runtime.NumGoroutine(), err
}

func cpuTime() (int64, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("bench: getrusage: %w", err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), nil
}

// quiet waits until the daemon has run no full pass for d.
func quiet(ctx context.Context, run *running, d time.Duration) error {
	_, last := run.d.Passes()
	since := time.Now()
	return waitUntil(ctx, 2*time.Minute, "the take-over's full passes to end", func() (bool, error) {
		if _, f := run.d.Passes(); f != last {
			last, since = f, time.Now()
		}
		return time.Since(since) >= d, nil
	})
}

// passCPU measures the daemon's CPU time per reconcile pass of one kind
// (idle or full, by the daemon's own pass counters) over passes passes,
// calling trigger (if set) to start each one.
func passCPU(ctx context.Context, run *running, full bool, passes int, trigger func()) (count int, perPass, wall int64, others int, err error) {
	counters := func() (mine, other int64) {
		idle, f := run.d.Passes()
		if full {
			return int64(f), int64(idle)
		}
		return int64(idle), int64(f)
	}
	counter := func() int64 { c, _ := counters(); return c }
	// one waits for the next pass, starting it with trigger if set.
	one := func(limit time.Duration) error {
		c := counter()
		if trigger != nil {
			trigger()
		}
		return waitUntil(ctx, limit, "a reconcile pass", func() (bool, error) { return counter() > c, nil })
	}
	// Let the passes after start-up settle. Idle passes are measured once
	// 20 in a row ran without a full one (the take-over's last full passes
	// are over); triggered ones after two of them.
	settled, need := 0, 2
	if trigger == nil {
		need = 20
	}
	for deadline := time.Now().Add(2 * time.Minute); settled < need; {
		if time.Now().After(deadline) {
			return 0, 0, 0, 0, fmt.Errorf("bench: passes did not settle in 2m")
		}
		_, o := counters()
		if err := one(time.Minute); err != nil {
			return 0, 0, 0, 0, err
		}
		if _, o2 := counters(); trigger == nil && o2 != o {
			settled = 0
			continue
		}
		settled++
	}
	c0, err := cpuTime()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	p0, o0 := counters()
	t0 := time.Now()
	for counter() < p0+int64(passes) {
		if trigger == nil {
			// Passes run on their own: look rarely, so that the
			// bench's own wake-ups stay out of the per-pass figure.
			if time.Since(t0) > 10*time.Minute {
				return 0, 0, 0, 0, fmt.Errorf("bench: %d passes in 10m, want %d", counter()-p0, passes)
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if err := one(10 * time.Minute); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	c1, err := cpuTime()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	p1, o1 := counters()
	count = int(p1 - p0)
	return count, (c1 - c0) / int64(count), int64(time.Since(t0)), int(o1 - o0), nil
}

// daemonRun is the daemon's memory and idle pass: RSS with n peers of k keys each (listener and
// established sockets), and CPU per idle reconcile pass.
func (r *runner) daemonRun(ctx context.Context, n, k, passes int) (*DaemonRun, error) {
	res := &DaemonRun{Peers: n, KeysPerPeer: k, Passes: passes}
	var err error
	if res.RSSBefore, res.HeapBefore, err = settled(); err != nil {
		return nil, err
	}
	// A: the daemon as operators run it (metrics on, 1s steady polls, 30s
	// resync): start-up, takeover, memory and the steady background CPU.
	e, run, spans, err := r.bringUp(ctx, n, k, daemonOpts{metrics: true})
	if err != nil {
		return nil, err
	}
	defer e.close()
	res.StartUp, res.Takeover = spans[0], spans[1]
	res.ListenerKeys, _ = countKeys(e.f.lnSock, -1)
	for i := range n {
		c, _ := countKeys(e.f.disc.Socket(uint64(i+2)), -1)
		res.EstablishedKeys += c
	}
	if res.RSSDaemon, res.HeapDaemon, res.StackDaemon, res.GoroutinesDaemon, err = settledAll(); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	if r.cfg.HeapProfile != nil {
		if err := pprof.Lookup("heap").WriteTo(r.cfg.HeapProfile, 0); err != nil {
			return nil, errors.Join(fmt.Errorf("bench: heap profile: %w", err), run.stop())
		}
	}
	// Steady background CPU over one steady re-read period (every session
	// re-read once, with jitter), which also holds a full pass and a key
	// source read; no scrape.
	const window = 30 * time.Second
	// Let the take-over's last full passes finish first.
	if err := quiet(ctx, run, 3*time.Second); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	if r.cfg.SteadyProfile != nil {
		if err := pprof.StartCPUProfile(r.cfg.SteadyProfile); err != nil {
			return nil, errors.Join(fmt.Errorf("bench: steady profile: %w", err), run.stop())
		}
	}
	c0, err := cpuTime()
	if err != nil {
		return nil, errors.Join(err, run.stop())
	}
	time.Sleep(window)
	c1, err := cpuTime()
	if r.cfg.SteadyProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, errors.Join(err, run.stop())
	}
	res.SteadyWindow = int64(window)
	res.SteadyCPUPerSec = int64(float64(c1-c0) / window.Seconds())
	// Metrics scrapes as Prometheus gets them (the text format, through
	// aokeyd's handler): the first (every series created), then one a
	// scrape interval later (15s: meanwhile about half the sessions'
	// steady re-reads publish new counters); then one gather of what a
	// protobuf scrape gets (its encoding not included: what this item
	// measured before the text path).
	scrape := func() (cpu, wall int64, n int, err error) {
		c0, err := cpuTime()
		if err != nil {
			return 0, 0, 0, err
		}
		t0 := time.Now()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
		w := &countingWriter{header: http.Header{}}
		run.scrape.ServeHTTP(w, req)
		c1, err := cpuTime()
		return c1 - c0, int64(time.Since(t0)), w.n, err
	}
	// One scrape's CPU varies by a quarter between runs (the GC, the
	// background re-reads beside it): scrapeRuns of them, an interval
	// apart, and the median is the figure.
	var serr error
	if res.ScrapeFirstCPU, _, _, serr = scrape(); serr == nil {
		type sample struct{ cpu, wall int64 }
		var ss []sample
		for range scrapeRuns {
			time.Sleep(15 * time.Second)
			var s sample
			if s.cpu, s.wall, res.ScrapeBytes, serr = scrape(); serr != nil {
				break
			}
			ss = append(ss, s)
			res.ScrapeCPUs = append(res.ScrapeCPUs, s.cpu)
		}
		if len(ss) > 0 {
			slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.cpu, b.cpu) })
			res.ScrapeCPU, res.ScrapeWall = ss[len(ss)/2].cpu, ss[len(ss)/2].wall
		}
	}
	if serr != nil {
		r.log.Warn("scrape CPU not measured", "err", serr)
	}
	// The gather's CPU moves with the GC's pacing as much as the scrape's:
	// scrapeRuns of them, one after the other, and the median.
	for range scrapeRuns {
		if c0, err = cpuTime(); err != nil {
			break
		}
		var mfs, series int
		if got, gerr := run.reg.Gather(); gerr == nil {
			mfs = len(got)
			for _, mf := range got {
				series += len(mf.GetMetric())
			}
		}
		if c1, err = cpuTime(); err != nil {
			break
		}
		res.ScrapeGatherCPUs = append(res.ScrapeGatherCPUs, c1-c0)
		res.ScrapeFamilies, res.ScrapeSeries = mfs, series
	}
	res.ScrapeGatherCPU = Median(res.ScrapeGatherCPUs)
	// Memory once scraped: every series exists, with what a text and a
	// protobuf scrape keep.
	if res.RSSScraped, res.HeapScraped, _, _, err = settledAll(); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	if err := run.stop(); err != nil {
		return nil, err
	}
	if res.RSSHarness, res.HeapHarness, res.StackHarness, res.GoroutinesHarness, err = settledAll(); err != nil {
		return nil, err
	}
	r.log.Info("daemon memory", "rss_before", res.RSSBefore, "rss_daemon", res.RSSDaemon, "rss_harness", res.RSSHarness,
		"heap_daemon", res.HeapDaemon, "heap_harness", res.HeapHarness, "steady_cpu_per_s", time.Duration(res.SteadyCPUPerSec),
		"scrape_first_cpu", time.Duration(res.ScrapeFirstCPU), "scrape_cpu", time.Duration(res.ScrapeCPU), "scrape_wall", time.Duration(res.ScrapeWall), "scrape_bytes", res.ScrapeBytes, "scrape_gather_cpu", time.Duration(res.ScrapeGatherCPU), "scrape_series", res.ScrapeSeries)

	// B: idle passes (key source reads that find nothing new) and change
	// passes (an input changed: every peer's desired state recomputed),
	// steady re-reads and full passes out of the way.
	run, err = r.startDaemon(e, daemonOpts{refresh: 20 * time.Millisecond, resync: time.Hour, steady: time.Hour, poll: time.Hour, metrics: true})
	if err != nil {
		return nil, err
	}
	if err := run.waitTakeover(ctx, n); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	prof := r.cfg.PassProfile != nil
	if prof {
		if err := pprof.StartCPUProfile(r.cfg.PassProfile); err != nil {
			return nil, errors.Join(fmt.Errorf("bench: pass profile: %w", err), run.stop())
		}
	}
	res.IdlePasses, res.IdlePassCPU, _, res.FullDuringIdle, err = passCPU(ctx, run, false, 40*passes, nil)
	if prof {
		pprof.StopCPUProfile()
	}
	if err == nil {
		// The key source reads (every 20ms here) run idle passes between
		// the kicked ones: their CPU, at the figure just measured, is
		// taken out.
		var idles int
		res.ChangePasses, res.ChangePassCPU, _, idles, err = passCPU(ctx, run, true, passes, run.d.Kick)
		if err == nil {
			res.IdleBetweenChange = idles
			res.ChangePassCPU -= int64(idles) * res.IdlePassCPU / int64(res.ChangePasses)
		}
	}
	if serr := run.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	// C: full passes with nothing changed (the drift check every Resync:
	// the listener's keys re-read and compared).
	run, err = r.startDaemon(e, daemonOpts{refresh: time.Hour, resync: 50 * time.Millisecond, steady: time.Hour, poll: time.Hour, metrics: true})
	if err != nil {
		return nil, err
	}
	if err := run.waitTakeover(ctx, n); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	res.FullPasses, res.FullPassCPU, _, _, err = passCPU(ctx, run, true, passes, nil)
	if serr := run.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	r.log.Info("passes", "idle", res.IdlePasses, "idle_cpu", time.Duration(res.IdlePassCPU),
		"change", res.ChangePasses, "change_cpu", time.Duration(res.ChangePassCPU),
		"full", res.FullPasses, "full_cpu", time.Duration(res.FullPassCPU))
	return res, nil
}

// daemonItems runs the emergency revoke and the daemon memory/idle-pass
// run when configured.
func (r *runner) daemonItems(ctx context.Context, res *Results) error {
	if r.cfg.RevokePeers == 0 && r.cfg.DaemonPeers == 0 {
		return nil
	}
	if err := raiseNoFile(uint64(4*max(r.cfg.RevokePeers, r.cfg.DaemonPeers) + 1024)); err != nil {
		return err
	}
	var err error
	if r.cfg.RevokePeers > 0 {
		if res.Revoke, err = r.revokeRun(ctx, r.cfg.RevokePeers); err != nil {
			// Recorded, not fatal: the other items' results still count.
			r.log.Error("revoke benchmark failed", "err", err)
			res.DaemonErrors = append(res.DaemonErrors, Skip{Item: "3. Emergency revoke", Why: "FAILED: " + err.Error()})
		}
	}
	if r.cfg.DaemonPeers > 0 {
		if res.Daemon, err = r.daemonRun(ctx, r.cfg.DaemonPeers, r.cfg.DaemonKeys, r.cfg.IdlePasses); err != nil {
			r.log.Error("daemon benchmark failed", "err", err)
			res.DaemonErrors = append(res.DaemonErrors, Skip{Item: "5. Daemon RSS and idle reconcile pass", Why: "FAILED: " + err.Error()})
		}
	}
	return nil
}

// minLevel drops records below min: the daemon logs every session at Info,
// thousands of lines on the guest's slow console.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(g string) slog.Handler { return minLevel{h.Handler.WithGroup(g), h.min} }

// countingWriter is an http.ResponseWriter that counts the body and keeps
// nothing.
type countingWriter struct {
	header http.Header
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
