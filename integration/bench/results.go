package bench

import (
	"fmt"
	"slices"
	"time"
)

// Results is everything one `make bench` run measured. Durations are in
// nanoseconds; every slice of runs holds one value per repetition.
type Results struct {
	Kernel        string    `json:"kernel"`
	CPUs          int       `json:"cpus"`
	GoVersion     string    `json:"go_version"`
	Algorithm     string    `json:"algorithm"`
	PeersPerBatch int       `json:"peers_per_batch"`
	Started       time.Time `json:"started"`
	Elapsed       int64     `json:"elapsed_ns"`

	Sizes     []Size       `json:"sizes"`
	Deletes   []Deletes    `json:"deletes"`
	Phases    []Phases     `json:"phases"`
	OptMem    OptMem       `json:"optmem"`
	Planner   []PlanPoint  `json:"planner"`
	PlanBench []GoBenchRow `json:"plan_bench"`
	Skipped   []Skip       `json:"skipped"`
	// DaemonErrors are daemon items that were started and failed.
	DaemonErrors []Skip `json:"daemon_errors,omitempty"`
	// Revoke is the emergency revoke run and Daemon the daemon's memory
	// and idle-pass run (nil: not run).
	Revoke *RevokeRun `json:"revoke,omitempty"`
	// SODomainNs is one getsockopt(SO_DOMAIN): what tcpao saved per
	// AddKey/DelKey by caching the socket family.
	SODomainNs int64      `json:"so_domain_ns,omitempty"`
	Daemon     *DaemonRun `json:"daemon,omitempty"`
	// Profile is the top of a CPU profile of aokeyd's rotation at the
	// largest N (filled in on the host with go tool pprof).
	Profile string `json:"profile,omitempty"`
	// PassProfile and SteadyProfile are the tops (go tool pprof -top -cum)
	// of the daemon run's idle-pass and steady-window CPU profiles.
	PassProfile   string `json:"pass_profile,omitempty"`
	SteadyProfile string `json:"steady_profile,omitempty"`
}

// Size holds the install and rotation runs at one N.
type Size struct {
	N             int     `json:"n"`
	InstallRaw    []int64 `json:"install_raw_ns"`
	InstallAokeyd []int64 `json:"install_aokeyd_ns"`
	RotateRaw     []int64 `json:"rotate_raw_ns"`
	RotateAokeyd  []int64 `json:"rotate_aokeyd_ns"`
	// RotatePlanOrder is the raw loop retiring peers in aokeyd's plan
	// order before ListenerBatches followed the kernel's list (oldest
	// installed first), on a fresh listener; older results only.
	RotatePlanOrder []int64 `json:"rotate_raw_plan_order_ns,omitempty"`
	// RotateOldestFirst is the raw loop's same rotation retiring the
	// oldest installed key first, right after RotateRaw on the same
	// listener; RotateAokeydOldestFirst is aokeyd's rotation with its
	// peers reversed the same way (first repetition only).
	RotateOldestFirst       []int64 `json:"rotate_raw_oldest_first_ns,omitempty"`
	RotateAokeydOldestFirst []int64 `json:"rotate_aokeyd_oldest_first_ns,omitempty"`
	// RotateRawSys and RotateAokeydSys are the kernel time of RotateRaw and
	// RotateAokeyd: the system CPU of the thread that made the calls
	// (getrusage(RUSAGE_THREAD)), each rotation on a fresh listener right
	// after its install, newest installed key retired first in both.
	RotateRawSys    []int64 `json:"rotate_raw_sys_ns,omitempty"`
	RotateAokeydSys []int64 `json:"rotate_aokeyd_sys_ns,omitempty"`
	// RotateRawGC and RotateAokeydGC count the Go collector's cycles that
	// ended during each of those rotations: a cycle's marking runs on the
	// guest's other vCPU beside the rotating thread.
	RotateRawGC    []int64 `json:"rotate_raw_gc_cycles,omitempty"`
	RotateAokeydGC []int64 `json:"rotate_aokeyd_gc_cycles,omitempty"`
	// TurnsRawSys and TurnsAokeydSys are the kernel time of each rotator's
	// turns on one shared listener (turnsRun: raw, aokeyd, aokeyd, raw,
	// ...), TurnsRaw and TurnsAokeyd their wall times, TurnsRawGC and
	// TurnsAokeydGC the collector cycles in each.
	TurnsRaw       []int64 `json:"turns_raw_ns,omitempty"`
	TurnsAokeyd    []int64 `json:"turns_aokeyd_ns,omitempty"`
	TurnsRawSys    []int64 `json:"turns_raw_sys_ns,omitempty"`
	TurnsAokeydSys []int64 `json:"turns_aokeyd_sys_ns,omitempty"`
	TurnsRawGC     []int64 `json:"turns_raw_gc_cycles,omitempty"`
	TurnsAokeydGC  []int64 `json:"turns_aokeyd_gc_cycles,omitempty"`
	// The cross pass (first repetition at the largest N): the raw loop
	// rotating a list SyncListener installed, SyncListener rotating a list
	// the raw loop installed (wall and kernel time), and the heads of the
	// two installs' listings.
	CrossRawOnAokeyd    []int64 `json:"cross_raw_on_aokeyd_ns,omitempty"`
	CrossRawOnAokeydSys []int64 `json:"cross_raw_on_aokeyd_sys_ns,omitempty"`
	CrossAokeydOnRaw    []int64 `json:"cross_aokeyd_on_raw_ns,omitempty"`
	CrossAokeydOnRawSys []int64 `json:"cross_aokeyd_on_raw_sys_ns,omitempty"`
	CrossHeads          string  `json:"cross_heads,omitempty"`
}

// Deletes compares del_async with synchronous deletes on the same plan.
type Deletes struct {
	N int `json:"n"`
	// Sample is how many peers got synchronous deletes; SyncDelMean is
	// their mean delete time and AsyncSampleMean the mean del_async time of
	// the same plan positions in the del_async run.
	Sample          int   `json:"sample"`
	SyncDelMean     int64 `json:"sync_del_mean_ns"`
	AsyncSampleMean int64 `json:"async_sample_mean_ns"`
	// AsyncDrain is the measured sum of all N del_async calls and
	// AsyncAddMean the mean add of the same run.
	AsyncDrain   int64 `json:"async_drain_ns"`
	AsyncAddMean int64 `json:"async_add_mean_ns"`
}

// SyncDrainExtrapolated is N times the sampled synchronous delete.
func (d Deletes) SyncDrainExtrapolated() int64 { return d.SyncDelMean * int64(d.N) }

// Speedup is the sampled synchronous delete over del_async at the same
// positions.
func (d Deletes) Speedup() float64 { return ratio(d.SyncDelMean, d.AsyncSampleMean) }

// Phases splits one aokeyd rotation (the same steps as SyncListener, timed
// one by one) at N.
type Phases struct {
	N           int   `json:"n"`
	Observe     int64 `json:"observe_ns"`
	Plan        int64 `json:"plan_ns"`
	Batches     int64 `json:"batches_ns"`
	CheckOptMem int64 `json:"check_optmem_ns"`
	Adds        int64 `json:"adds_ns"`
	Dels        int64 `json:"dels_ns"`
}

// OptMem is the socket option memory part of the start-up benchmark.
type OptMem struct {
	Default  int `json:"default"`
	Raised   int `json:"raised"`
	KeyBytes int `json:"key_bytes"`
	// Needed is tcpao.OptMemNeeded at the largest N; RotationPeak is
	// rotator.CheckOptMem's peak for the rotation there.
	N            int `json:"n"`
	Needed       int `json:"needed"`
	RotationPeak int `json:"rotation_peak"`
	// PredictedKeys is tcpao.OptMemMaxKeys(Default); MeasuredKeys how many
	// adds the kernel took before ENOMEM under Default.
	PredictedKeys int    `json:"predicted_keys"`
	MeasuredKeys  int    `json:"measured_keys"`
	ENOMEM        bool   `json:"enomem"`
	Refusal       string `json:"refusal"`
	RefusalClean  bool   `json:"refusal_clean"`
}

// PlanPoint is rotator.PlanAll on Peers established sockets (4 keys each,
// mid-roll) measured with testing.Benchmark.
type PlanPoint struct {
	Peers       int   `json:"peers"`
	NsPerOp     int64 `json:"ns_per_op"`
	AllocsPerOp int64 `json:"allocs_per_op"`
	BytesPerOp  int64 `json:"bytes_per_op"`
	Runs        int   `json:"runs"`
}

// GoBenchRow is one line of `go test -bench -benchmem` output.
type GoBenchRow struct {
	Where       string  `json:"where"`
	Name        string  `json:"name"`
	Runs        int     `json:"runs"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	// Extra holds the benchmark's own metrics (b.ReportMetric), by unit:
	// BenchmarkIdlePass reports cpu-ns/pass and full-passes.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// Sort is the figure repeated runs are ordered by: CPU per pass where the
// benchmark reports it (its ns/op is a wait, not work), else ns/op.
func (r GoBenchRow) Sort() float64 {
	if v, ok := r.Extra[UnitCPUPerPass]; ok {
		return v
	}
	return r.NsPerOp
}

// UnitCPUPerPass is BenchmarkIdlePass's metric.
const UnitCPUPerPass = "cpu-ns/pass"

// RevokeRun is the emergency revoke: `aoctl revoke` of one key across Peers established
// sessions and the listener, driven through the real daemon package over
// real loopback TCP-AO sockets.
type RevokeRun struct {
	Peers        int `json:"peers"`
	KeysPerPeer  int `json:"keys_per_peer"`
	ListenerKeys int `json:"listener_keys"`
	// StartUp is daemon start to the listener's keys installed; Takeover
	// is the first connect to every session taken over and steady.
	StartUp  int64 `json:"startup_ns"`
	Takeover int64 `json:"takeover_ns"`
	// Wall is exec of aoctl to its exit; Server the daemon's own Elapsed.
	// ToArrival is exec to the request reaching the daemon; ToDone exec
	// to the daemon done with it (the last socket handled and the key
	// source told): the issue's "from the CLI command to the last socket
	// done".
	Wall      int64 `json:"wall_ns"`
	Server    int64 `json:"server_ns"`
	ToArrival int64 `json:"to_arrival_ns"`
	ToDone    int64 `json:"to_done_ns"`
	ExitOK    bool  `json:"exit_ok"`
	// ExecBaseline is `aoctl --help` from exec to exit: process start-up.
	ExecBaseline int64 `json:"exec_baseline_ns"`
	// Actions counts the per-socket outcomes aoctl printed.
	Actions       map[string]int `json:"actions"`
	Errors        int            `json:"errors"`
	FirstError    string         `json:"first_error,omitempty"`
	SourceRevoked bool           `json:"source_revoked"`
	// KeyGone counts the sockets (of Peers+1) read back without the key
	// (established ones also sending with the backup); DataOK the sessions
	// that carried a byte each way afterwards.
	KeyGone   int    `json:"key_gone"`
	DataOK    int    `json:"data_ok"`
	DataError string `json:"data_error,omitempty"`
}

// TargetRevoke is the emergency revoke's bound on the wall time.
const TargetRevoke = time.Second

// RevokeVerdict judges the wall time and the afterwards checks.
func (v RevokeRun) Verdict() string {
	switch {
	case !v.ExitOK || v.Errors > 0 || v.KeyGone != v.Peers+1 || v.DataOK != v.Peers:
		return "FAILED"
	case v.ToDone == 0:
		return "FAILED (the daemon's completion time was not recorded)"
	case time.Duration(v.ToDone) < TargetRevoke:
		return fmt.Sprintf("target<%v met", TargetRevoke)
	}
	return fmt.Sprintf("target<%v MISSED by %.0f%%", TargetRevoke, (float64(v.ToDone)/float64(TargetRevoke)-1)*100)
}

// DaemonRun is the daemon's memory with Peers sessions of
// KeysPerPeer keys (on the listener and on every established socket) and
// its CPU time per reconcile pass when nothing changes.
type DaemonRun struct {
	Peers           int   `json:"peers"`
	KeysPerPeer     int   `json:"keys_per_peer"`
	ListenerKeys    int   `json:"listener_keys"`
	EstablishedKeys int   `json:"established_keys"`
	StartUp         int64 `json:"startup_ns"`
	Takeover        int64 `json:"takeover_ns"`
	// RSS and Go heap in use (after a GC returning memory to the OS):
	// before anything, with the daemon running over the fleet, and with
	// the fleet alone after the daemon stopped. The daemon's share is
	// RSSDaemon-RSSHarness.
	RSSBefore   int64 `json:"rss_before"`
	RSSDaemon   int64 `json:"rss_daemon"`
	RSSHarness  int64 `json:"rss_harness"`
	HeapBefore  int64 `json:"heap_before"`
	HeapDaemon  int64 `json:"heap_daemon"`
	HeapHarness int64 `json:"heap_harness"`
	// StackDaemon and StackHarness are the goroutine stacks' memory
	// (MemStats.StackInuse, not in the heap), GoroutinesDaemon and
	// GoroutinesHarness how many goroutines there were, at the same two
	// readings.
	StackDaemon       int64 `json:"stack_daemon,omitempty"`
	StackHarness      int64 `json:"stack_harness,omitempty"`
	GoroutinesDaemon  int   `json:"goroutines_daemon,omitempty"`
	GoroutinesHarness int   `json:"goroutines_harness,omitempty"`
	// RSSScraped and HeapScraped are read after the scrapes below (every
	// per-peer series created, and what the scrapes keep), the daemon
	// still running.
	RSSScraped  int64 `json:"rss_scraped,omitempty"`
	HeapScraped int64 `json:"heap_scraped,omitempty"`
	// SteadyCPUPerSec is the process's CPU time per second of wall time
	// over SteadyWindow with the daemon idle as operators run it (default
	// steady re-reads, full passes and key source reads; metrics on, not
	// scraped). ScrapeCPU is the CPU of one metrics scrape as Prometheus
	// gets it, through aokeyd's handler in the text format: the median of
	// ScrapeCPUs, scrapeRuns scrapes 15s apart after the first (ScrapeWall
	// the median one's wall time, ScrapeBytes the body), and
	// ScrapeFirstCPU the first one's (every series created); ScrapeGatherCPU the CPU of one
	// gather of what a protobuf scrape gets, its encoding not included
	// (what this item measured as its scrape before the text path), the
	// median of ScrapeGatherCPUs (scrapeRuns gathers in a row; one before),
	// ScrapeFamilies and ScrapeSeries what that gather returned.
	SteadyWindow     int64   `json:"steady_window_ns"`
	SteadyCPUPerSec  int64   `json:"steady_cpu_per_s_ns"`
	ScrapeCPU        int64   `json:"scrape_cpu_ns"`
	ScrapeCPUs       []int64 `json:"scrape_cpus_ns,omitempty"`
	ScrapeFirstCPU   int64   `json:"scrape_first_cpu_ns,omitempty"`
	ScrapeWall       int64   `json:"scrape_wall_ns"`
	ScrapeBytes      int     `json:"scrape_bytes,omitempty"`
	ScrapeGatherCPU  int64   `json:"scrape_gather_cpu_ns,omitempty"`
	ScrapeGatherCPUs []int64 `json:"scrape_gather_cpus_ns,omitempty"`
	ScrapeFamilies   int     `json:"scrape_families"`
	ScrapeSeries     int     `json:"scrape_series,omitempty"`
	// Passes is the configured count; CPU per pass (getrusage self) of:
	// idle passes (a key source read finding nothing new: no policy
	// evaluation, no kernel read), change passes (an input changed: every
	// peer's desired state recomputed, the listener re-read), full passes
	// with nothing changed (the drift check every Resync).
	Passes      int   `json:"passes"`
	IdlePasses  int   `json:"idle_passes"`
	IdlePassCPU int64 `json:"idle_pass_cpu_ns"`
	// FullDuringIdle counts full passes that ran inside the idle window
	// (their CPU is in IdlePassCPU; 0 when the window was clean).
	FullDuringIdle int   `json:"full_during_idle"`
	ChangePasses   int   `json:"change_passes"`
	ChangePassCPU  int64 `json:"change_pass_cpu_ns"`
	// IdleBetweenChange counts the idle passes that ran between the change
	// passes (their CPU at IdlePassCPU is not in ChangePassCPU).
	IdleBetweenChange int   `json:"idle_between_change"`
	FullPasses        int   `json:"full_passes"`
	FullPassCPU       int64 `json:"full_pass_cpu_ns"`
}

// Targets of the daemon's memory and idle pass.
const (
	TargetRSS     = 100 << 20
	TargetPassCPU = time.Millisecond
)

// DaemonRSS is the daemon's share of the process's resident memory.
func (d DaemonRun) DaemonRSS() int64 { return d.RSSDaemon - d.RSSHarness }

// RSSVerdict judges the whole process's RSS (an upper bound of the
// daemon's).
func (d DaemonRun) RSSVerdict() string {
	if d.RSSDaemon < TargetRSS {
		return fmt.Sprintf("target<%s met", Bytes(TargetRSS))
	}
	return fmt.Sprintf("target<%s MISSED by %.0f%%", Bytes(TargetRSS), (float64(d.RSSDaemon)/TargetRSS-1)*100)
}

// PassVerdict judges one CPU-per-pass figure.
func PassVerdict(ns int64) string {
	if time.Duration(ns) < TargetPassCPU {
		return fmt.Sprintf("target<%v met", TargetPassCPU)
	}
	return fmt.Sprintf("target<%v MISSED by %.0f%%", TargetPassCPU, (float64(ns)/float64(TargetPassCPU)-1)*100)
}

// Skip is a benchmark of the issue this run does not perform, and why.
type Skip struct {
	Item string `json:"item"`
	Why  string `json:"why"`
}

// Targets from the issue.
const (
	TargetRatio = 1.05
	// TargetKernelRatio bounds aokeyd's kernel time over a rotation
	// against the raw loop's in the same retire order.
	TargetKernelRatio = 1.10
	TargetSpeedup     = 30.0
	TargetPlan        = 50 * time.Millisecond
	planPeers         = 10000
)

// Median is the median of xs (the lower middle for an even count), 0 for none.
func Median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Comparison is one aokeyd-versus-raw line of the report.
type Comparison struct {
	What   string
	N      int
	Raw    int64
	Aokeyd int64
	Runs   int
}

// Ratio is aokeyd over raw.
func (c Comparison) Ratio() float64 { return ratio(c.Aokeyd, c.Raw) }

// Verdict says whether the ratio meets TargetRatio and by how much it misses.
func (c Comparison) Verdict() string { return ratioVerdict(c.Ratio()) }

func ratioVerdict(r float64) string {
	if r <= TargetRatio {
		return fmt.Sprintf("target<=%.2f met", TargetRatio)
	}
	return fmt.Sprintf("target<=%.2f MISSED by %.1f%%", TargetRatio, (r/TargetRatio-1)*100)
}

// OrderEffect is the same rotation retiring the newest installed keys first
// (Fast) and the oldest first (Slow), raw loop or aokeyd, at N.
type OrderEffect struct {
	Who        string
	N          int
	Fast, Slow int64
	Runs       int
}

// Orders lists the order comparisons the results hold.
func (r *Results) Orders() []OrderEffect {
	var out []OrderEffect
	for _, s := range r.Sizes {
		if len(s.RotateOldestFirst) > 0 {
			out = append(out, OrderEffect{Who: "raw loop", N: s.N, Fast: Median(s.RotateRaw), Slow: Median(s.RotateOldestFirst), Runs: len(s.RotateOldestFirst)})
		}
		if len(s.RotateAokeydOldestFirst) > 0 {
			out = append(out, OrderEffect{Who: "aokeyd", N: s.N, Fast: Median(s.RotateAokeyd[:1]), Slow: Median(s.RotateAokeydOldestFirst), Runs: 1})
		}
	}
	return out
}

// Comparisons returns the install and rotation comparisons, medians per N.
func (r *Results) Comparisons() (install, rotate []Comparison) {
	for _, s := range r.Sizes {
		install = append(install, Comparison{What: "install", N: s.N, Raw: Median(s.InstallRaw), Aokeyd: Median(s.InstallAokeyd), Runs: len(s.InstallRaw)})
		rotate = append(rotate, Comparison{What: "rotate", N: s.N, Raw: Median(s.RotateRaw), Aokeyd: Median(s.RotateAokeyd), Runs: len(s.RotateRaw)})
	}
	return install, rotate
}

// KernelTimes compares the rotations' kernel time (system CPU of the
// rotating thread), medians per N, for the sizes that measured it.
func (r *Results) KernelTimes() []Comparison {
	var out []Comparison
	for _, s := range r.Sizes {
		if len(s.RotateRawSys) > 0 && len(s.RotateAokeydSys) > 0 {
			out = append(out, Comparison{What: "kernel time", N: s.N, Raw: Median(s.RotateRawSys), Aokeyd: Median(s.RotateAokeydSys), Runs: len(s.RotateRawSys)})
		}
	}
	return out
}

// turnWho is who rotates the shared listener in turn i: raw, aokeyd,
// aokeyd, raw, raw, aokeyd, ... (ABBA): any drift linear in time (the
// host, the guest's slab, the list's layout after each rotation) lands on
// both equally over every four turns.
func turnWho(i int) (aokeyd bool) { return i%4 == 1 || i%4 == 2 }

// TurnTimes is the kernel time per rotation at each N where the rotators
// took turns on one listener: the mean of each one's turns (ABBA, so
// drift linear in time cancels in means, not in medians).
func (r *Results) TurnTimes() []Comparison {
	var out []Comparison
	for _, s := range r.Sizes {
		if len(s.TurnsRawSys) > 0 && len(s.TurnsAokeydSys) > 0 {
			out = append(out, Comparison{What: "kernel time, turns", N: s.N, Raw: mean(s.TurnsRawSys), Aokeyd: mean(s.TurnsAokeydSys),
				Runs: min(len(s.TurnsRawSys), len(s.TurnsAokeydSys))})
		}
	}
	return out
}

// KernelVerdict judges a kernel-time ratio against TargetKernelRatio.
func KernelVerdict(r float64) string {
	if r <= TargetKernelRatio {
		return fmt.Sprintf("target<=%.2f met", TargetKernelRatio)
	}
	return fmt.Sprintf("target<=%.2f MISSED by %.1f%%", TargetKernelRatio, (r/TargetKernelRatio-1)*100)
}

// SpeedupVerdict judges a sync/async speedup at N against TargetSpeedup,
// which the issue sets for the largest N.
func SpeedupVerdict(s float64) string {
	if s >= TargetSpeedup {
		return fmt.Sprintf("target>=%.0f met", TargetSpeedup)
	}
	return fmt.Sprintf("target>=%.0f MISSED by %.1f%%", TargetSpeedup, (1-s/TargetSpeedup)*100)
}

// PlanVerdict judges the planner at 10,000 peers.
func PlanVerdict(ns float64) string {
	if time.Duration(ns) < TargetPlan {
		return fmt.Sprintf("target<%v met", TargetPlan)
	}
	return fmt.Sprintf("target<%v MISSED by %.0f%%", TargetPlan, (ns/float64(TargetPlan)-1)*100)
}

// AllocsLinear reports whether allocations per peer stay within 10% of each
// other across the planner sweep (allocations linear in peers), and the
// per-peer range.
func (r *Results) AllocsLinear() (ok bool, lo, hi float64) {
	for i, p := range r.Planner {
		if p.Peers == 0 {
			continue
		}
		v := float64(p.AllocsPerOp) / float64(p.Peers)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return len(r.Planner) > 1 && lo > 0 && hi <= lo*1.10, lo, hi
}

// MedianBench folds repeated `go test -count` rows into one per place and
// benchmark: the row with the median ns/op, Runs set to how many rows there
// were.
func MedianBench(rows []GoBenchRow) []GoBenchRow {
	type key struct{ where, name string }
	var order []key
	by := map[key][]GoBenchRow{}
	for _, r := range rows {
		k := key{r.Where, r.Name}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	out := make([]GoBenchRow, 0, len(order))
	for _, k := range order {
		rs := slices.Clone(by[k])
		slices.SortFunc(rs, func(a, b GoBenchRow) int {
			switch {
			case a.Sort() < b.Sort():
				return -1
			case a.Sort() > b.Sort():
				return 1
			}
			return 0
		})
		m := rs[(len(rs)-1)/2]
		m.Runs = len(rs)
		out = append(out, m)
	}
	return out
}

func sum(xs []int64) int64 {
	var t int64
	for _, x := range xs {
		t += x
	}
	return t
}

func mean(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	return sum(xs) / int64(len(xs))
}
