package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Dur formats nanoseconds with three significant digits ("12.3 ms").
func Dur(ns int64) string {
	d := float64(ns)
	switch {
	case d >= 1e9:
		return sig(d/1e9) + " s"
	case d >= 1e6:
		return sig(d/1e6) + " ms"
	case d >= 1e3:
		return sig(d/1e3) + " µs"
	}
	return fmt.Sprintf("%.0f ns", d)
}

func sig(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Bytes formats a byte count in B, KiB or MiB ("93.4 MiB").
func Bytes(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

type tw struct {
	w   io.Writer
	err error
}

func (t *tw) f(format string, a ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format+"\n", a...)
	}
}

// WriteTable renders the report as text. Every aokeyd-versus-raw line
// carries ratio=X.XX, the async-versus-sync line speedup=X.X.
func WriteTable(w io.Writer, r *Results) error {
	t := &tw{w: w}
	t.f("aokeyd bench: %s, %d CPUs, %s, %s MKTs, SyncListener batches of %d peers, measured in %s",
		r.Kernel, r.CPUs, r.GoVersion, r.Algorithm, r.PeersPerBatch, time.Duration(r.Elapsed).Round(time.Second))
	t.f("Times are medians over [runs]; raw = bare setsockopt loop over pre-built requests, same process, fresh listener, same N.")
	install, rotate := r.Comparisons()
	t.f("")
	t.f("1. Install keys for N peers on one listener (aokeyd: rotator.SyncListener from empty)")
	for _, c := range install {
		t.f("   N=%-6d raw %-9s aokeyd %-9s [%d]  ratio=%.2f  %s", c.N, Dur(c.Raw), Dur(c.Aokeyd), c.Runs, c.Ratio(), c.Verdict())
	}
	t.f("")
	writeRotation(t, r, rotate)
	t.f("")
	writeDeletes(t, r)
	t.f("")
	writeRevoke(t, r.Revoke)
	writeDaemon(t, r.Daemon, MedianBench(r.PlanBench))
	for _, s := range r.Skipped {
		t.f("%s: SKIPPED: %s", s.Item, s.Why)
	}
	t.f("")
	writePlanner(t, r)
	t.f("")
	writeOptMem(t, r, install)
	writeProfiles(t, r)
	return t.err
}

// writeRotation is item 2: a full rotation of N peers, aokeyd against the
// raw loop, with the orderings and the time split when a target is missed.
func writeRotation(t *tw, r *Results, rotate []Comparison) {
	t.f("2. Full rotation of N peers (add new IDs, retire old). aokeyd: SyncListener (per peer add, del_async; peers in plan order)")
	t.f("   raw best ordering: per peer add-new then del_async-old, most recently installed peer first (each delete finds its key near the list head)")
	for _, c := range rotate {
		t.f("   N=%-6d raw %-9s aokeyd %-9s [%d]  ratio=%.2f  %s", c.N, Dur(c.Raw), Dur(c.Aokeyd), c.Runs, c.Ratio(), c.Verdict())
	}
	turns := map[int]bool{}
	for _, k := range r.TurnTimes() {
		turns[k.N] = true
		t.f("   kernel time N=%-6d (system CPU of the rotating thread, both taking turns on one listener, newest installed retired first): raw %s aokeyd %s [%d each, means]  kernel_ratio=%.2f  %s",
			k.N, Dur(k.Raw), Dur(k.Aokeyd), k.Runs, k.Ratio(), KernelVerdict(k.Ratio()))
	}
	for _, s := range r.Sizes {
		writeTurns(t, s)
	}
	for _, k := range r.KernelTimes() {
		if turns[k.N] { // the turns above are the measure; these are each rotator on its own listener
			t.f("   kernel time N=%d, each on a fresh listener after its install (medians): raw %s aokeyd %s [%d]  ratio %.2f",
				k.N, Dur(k.Raw), Dur(k.Aokeyd), k.Runs, k.Ratio())
			continue
		}
		t.f("   kernel time N=%-6d (system CPU of the rotating thread, same retire order, each on a fresh listener after its install): raw %s aokeyd %s [%d]  kernel_ratio=%.2f  %s",
			k.N, Dur(k.Raw), Dur(k.Aokeyd), k.Runs, k.Ratio(), KernelVerdict(k.Ratio()))
	}
	for _, s := range r.Sizes {
		writeKernelReps(t, s)
	}
	for _, s := range r.Sizes {
		if len(s.CrossRawOnAokeyd) == 0 || len(s.CrossAokeydOnRaw) == 0 {
			continue
		}
		t.f("   who built the list, N=%d (each on a fresh listener, newest installed retired first): raw loop rotating aokeyd's install %s (kernel %s), aokeyd rotating the raw loop's install %s (kernel %s); %s",
			s.N, Dur(s.CrossRawOnAokeyd[0]), Dur(s.CrossRawOnAokeydSys[0]), Dur(s.CrossAokeydOnRaw[0]), Dur(s.CrossAokeydOnRawSys[0]), s.CrossHeads)
		t.f("   (both installs leave the same list, newest first; every timed rotation starts settled, the Go heap collected)")
	}
	for _, o := range r.Orders() {
		t.f("   N=%-6d order, %s: newest installed retired first %s, oldest first %s [%d]: oldest-first costs %.2fx",
			o.N, o.Who, Dur(o.Fast), Dur(o.Slow), o.Runs, ratio(o.Slow, o.Fast))
	}
	phases := map[int]Phases{}
	for _, p := range r.Phases {
		phases[p.N] = p
	}
	explain := false
	for _, c := range rotate {
		p, ok := phases[c.N]
		if c.Ratio() <= TargetRatio || !ok {
			continue
		}
		explain = true
		t.f("   why N=%d: aokeyd +%s over raw; user space: optmem check %s, observe %s, plan %s, batches %s; kernel calls (adds+dels timed one by one, on the listener's third rotation: not the raw loop's list) %s",
			c.N, Dur(c.Aokeyd-c.Raw), Dur(p.CheckOptMem), Dur(p.Observe), Dur(p.Plan), Dur(p.Batches), Dur(p.Adds+p.Dels))
	}
	if explain {
		t.f("   (both retire the newest installed key first: the kernel adds at the head of its key list and a delete walks from the head;")
		t.f("    every add walks the whole list twice for KeyID clashes, so adds dominate the kernel time at large N)")
	}
	for _, p := range r.Phases {
		t.f("   aokeyd rotation split, N=%d (same steps timed one by one): observe %s, plan %s, batches %s, optmem check %s, %d adds %s, %d del_async %s",
			p.N, Dur(p.Observe), Dur(p.Plan), Dur(p.Batches), Dur(p.CheckOptMem), p.N, Dur(p.Adds), p.N, Dur(p.Dels))
	}
}

// writeKernelReps prints one size's kernel times repetition by repetition
// (who went first alternates), the spread of the raw loop's own, and the
// collector's cycles in each rotation, when the run recorded them: what the
// median ratio above is made of.
func writeKernelReps(t *tw, s Size) {
	if len(s.RotateRawSys) < 2 || len(s.RotateRawSys) != len(s.RotateAokeydSys) {
		return
	}
	var reps []string
	for i := range s.RotateRawSys {
		first := "raw first"
		if i%2 == 1 {
			first = "aokeyd first"
		}
		reps = append(reps, fmt.Sprintf("%s / %s (%.2f, %s)", Dur(s.RotateRawSys[i]), Dur(s.RotateAokeydSys[i]), ratio(s.RotateAokeydSys[i], s.RotateRawSys[i]), first))
	}
	lo, hi := slices.Min(s.RotateRawSys), slices.Max(s.RotateRawSys)
	t.f("   kernel time N=%d per repetition, raw / aokeyd: %s; the raw loop's own moved by %.0f%% between repetitions (min to max)",
		s.N, strings.Join(reps, ", "), (float64(hi)/float64(lo)-1)*100)
	if len(s.RotateRawGC) == len(s.RotateRawSys) && len(s.RotateAokeydGC) == len(s.RotateAokeydSys) {
		t.f("   Go collector cycles ended during those rotations, N=%d: raw %v, aokeyd %v (aokeyd allocates its read of the listener and its plan; the",
			s.N, s.RotateRawGC, s.RotateAokeydGC)
		t.f("    collector marks on the guest's other vCPU, and its kernel time is not the rotating thread's)")
	}
}

// writeTurns prints one size's turns on the shared listener in order, and
// the collector's cycles in each.
func writeTurns(t *tw, s Size) {
	if len(s.TurnsRawSys) == 0 || len(s.TurnsAokeydSys) == 0 {
		return
	}
	var turns []string
	ri, ai := 0, 0
	for ri < len(s.TurnsRawSys) || ai < len(s.TurnsAokeydSys) {
		if (turnWho(ri+ai) || ri == len(s.TurnsRawSys)) && ai < len(s.TurnsAokeydSys) {
			turns = append(turns, "aokeyd "+Dur(s.TurnsAokeydSys[ai]))
			ai++
		} else {
			turns = append(turns, "raw "+Dur(s.TurnsRawSys[ri]))
			ri++
		}
	}
	t.f("   turns N=%d in order: %s; collector cycles raw %v, aokeyd %v", s.N, strings.Join(turns, ", "), s.TurnsRawGC, s.TurnsAokeydGC)
	if len(s.TurnsRaw) > 0 && len(s.TurnsAokeyd) > 0 {
		t.f("   wall time of the same turns N=%d (means): raw %s aokeyd %s  ratio %.2f", s.N, Dur(mean(s.TurnsRaw)), Dur(mean(s.TurnsAokeyd)), ratio(mean(s.TurnsAokeyd), mean(s.TurnsRaw)))
	}
}

// writeDeletes is item 2b: del_async against synchronous deletes.
func writeDeletes(t *tw, r *Results) {
	t.f("2b. del_async vs synchronous deletes on the same aokeyd plan (per delete; sync on the first S peers of the plan, async at the same positions)")
	for _, d := range r.Deletes {
		t.f("   N=%-6d sync %s/del [S=%d]  async %s/del  speedup=%.1f  %s", d.N, Dur(d.SyncDelMean), d.Sample, Dur(d.AsyncSampleMean), d.Speedup(), SpeedupVerdict(d.Speedup()))
		label := "measured"
		if d.Sample < d.N {
			label = fmt.Sprintf("EXTRAPOLATED from %d", d.Sample)
		}
		t.f("            drain of all %d deletes: sync %s (%s), async %s (measured); mean add %s", d.N, Dur(d.SyncDrainExtrapolated()), label, Dur(d.AsyncDrain), Dur(d.AsyncAddMean))
	}
	t.f("   (the %.0fx target applies at the largest N)", TargetSpeedup)
	if r.SODomainNs > 0 {
		t.f("   getsockopt(SO_DOMAIN), which tcpao no longer issues per AddKey/DelKey (family cached per socket): %s per call", Dur(r.SODomainNs))
	}
}

// writePlanner is item 4: the planner alone, on the host and in the guest.
func writePlanner(t *tw, r *Results) {
	t.f("4. Planner alone (rotator.PlanAll, pure function; 4 keys per peer, mid-roll)")
	for _, b := range MedianBench(r.PlanBench) {
		if !strings.HasPrefix(b.Name, "BenchmarkPlan") {
			continue
		}
		verdict := PlanVerdict(b.NsPerOp)
		if b.Where != "host" {
			// A pure function on an emulated CPU (QEMU TCG, no KVM):
			// shown for scale, judged on the host row.
			verdict = "(emulated CPU; the target is judged on the host row)"
		}
		t.f("   rotator %s [%s, median of %d]: %s/op  %s/op  %d allocs/op  %s", b.Name, b.Where, b.Runs, Dur(int64(b.NsPerOp)), Bytes(b.BytesPerOp), b.AllocsPerOp, verdict)
	}
	if len(r.Planner) > 0 {
		parts := make([]string, 0, len(r.Planner))
		for _, p := range r.Planner {
			parts = append(parts, fmt.Sprintf("%d peers %s %d allocs (%.1f/peer)", p.Peers, Dur(p.NsPerOp), p.AllocsPerOp, float64(p.AllocsPerOp)/float64(p.Peers)))
		}
		t.f("   sweep [guest]: %s", strings.Join(parts, "; "))
		ok, lo, hi := r.AllocsLinear()
		verdict := "MISSED"
		if ok {
			verdict = "met"
		}
		t.f("   allocations linear in peers (per-peer count within 10%%): %s (%.1f..%.1f allocs/peer)", verdict, lo, hi)
	}
}

// writeOptMem is item 6: start-up with a large key set and socket option
// memory.
func writeOptMem(t *tw, r *Results, install []Comparison) {
	om := r.OptMem
	t.f("6. Start-up with a large key set (N=%d)", om.N)
	for i, c := range install {
		if c.N == om.N {
			t.f("   all %d keys installed by aokeyd in %s (raw loop %s), ratio=%.2f  %s", c.N, Dur(c.Aokeyd), Dur(c.Raw), c.Ratio(), install[i].Verdict())
		}
	}
	t.f("   optmem: %d keys x %d B = %s needed (tcpao.OptMemNeeded); rotation peak %s (rotator.CheckOptMem); default net.core.optmem_max %s",
		om.N, om.KeyBytes, Bytes(int64(om.Needed)), Bytes(int64(om.RotationPeak)), Bytes(int64(om.Default)))
	fit := "does NOT fit"
	if om.Needed < om.Default {
		fit = "fits"
	}
	t.f("   under the default: the key set %s; predicted %d keys (tcpao.OptMemMaxKeys), kernel took %d before ENOMEM=%v",
		fit, om.PredictedKeys, om.MeasuredKeys, om.ENOMEM)
	clean := "and installed keys anyway (BUG)"
	if om.RefusalClean {
		clean = "before installing anything"
	}
	if om.Refusal != "" {
		t.f("   SyncListener under the default refused %s: %s", clean, om.Refusal)
	} else {
		t.f("   SyncListener under the default did not refuse")
	}
	t.f("   this run raised net.core.optmem_max to %s", Bytes(int64(om.Raised)))
}

// writeProfiles appends the CPU profiles the run captured.
func writeProfiles(t *tw, r *Results) {
	if r.Profile != "" {
		t.f("")
		t.f("CPU profile of aokeyd's rotation at N=%d (go tool pprof -top; syscall time is the kernel's work):", r.OptMem.N)
		writeProfile(t, r.Profile, 0)
	}
	if r.PassProfile != "" {
		t.f("")
		t.f("CPU profile of the daemon's idle reconcile passes (go tool pprof -top -cum): the Go runtime's timer wake-up, not the daemon's code:")
		writeProfile(t, r.PassProfile, 24)
	}
	if r.SteadyProfile != "" {
		t.f("")
		t.f("CPU profile of the daemon's steady window, as operators run it (go tool pprof -top -cum):")
		writeProfile(t, r.SteadyProfile, 30)
	}
}

// writeProfile indents a pprof -top summary, dropping the header lines that
// name files and times, and keeps at most max rows of its table (0: all).
func writeProfile(t *tw, top string, max int) {
	rows, inTable := 0, false
	for _, l := range strings.Split(strings.TrimRight(top, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "File:"), strings.HasPrefix(l, "Build ID:"), strings.HasPrefix(l, "Type:"), strings.HasPrefix(l, "Time:"):
			continue
		case inTable:
			if rows++; max > 0 && rows > max {
				continue
			}
		case strings.HasPrefix(strings.TrimSpace(l), "flat"):
			inTable = true
		}
		t.f("   %s", l)
	}
}

func writeRevoke(t *tw, v *RevokeRun) {
	if v == nil {
		return
	}
	t.f("3. Emergency revoke of one key (core/k1 of %d per peer) across %d established sessions and the listener (%d keys)", v.KeysPerPeer, v.Peers, v.ListenerKeys)
	t.f("   real daemon package over real loopback TCP-AO sockets; aoctl (copied to the guest's tmpfs) exec'd against the control socket")
	acts := make([]string, 0, len(v.Actions))
	for _, a := range sortedKeys(v.Actions) {
		acts = append(acts, fmt.Sprintf("%s=%d", a, v.Actions[a]))
	}
	t.f("   aoctl revoke: exec to the last socket done %s  %s", Dur(v.ToDone), v.Verdict())
	t.f("   (exec to the request at the daemon %s, the daemon's own %s; exec to aoctl's exit %s, exit ok=%v; socket outcomes: %s; errors=%d)",
		Dur(v.ToArrival), Dur(v.Server), Dur(v.Wall), v.ExitOK, strings.Join(acts, " "), v.Errors)
	t.f("   (starting aoctl alone, `aoctl --help` exec to exit: %s)", Dur(v.ExecBaseline))
	if v.FirstError != "" {
		t.f("   first error: %s", v.FirstError)
	}
	src := "revoked"
	if !v.SourceRevoked {
		src = "NOT revoked"
	}
	t.f("   afterwards: %d/%d sockets without the key (sessions sending with the backup), %d/%d sessions carried data both ways; key source %s",
		v.KeyGone, v.Peers+1, v.DataOK, v.Peers, src)
	if v.DataError != "" {
		t.f("   data errors: %s", v.DataError)
	}
	t.f("   set-up: the daemon installed the listener's %d keys in %s; %d sessions connected and taken over (all steady) in %s",
		v.ListenerKeys, Dur(v.StartUp), v.Peers, Dur(v.Takeover))
	t.f("")
}

func writeDaemon(t *tw, v *DaemonRun, goBench []GoBenchRow) {
	if v == nil {
		return
	}
	t.f("5. Daemon memory and idle reconcile pass: %d peers x %d keys = %d keys on the listener, %d on the %d established sockets (real sockets)",
		v.Peers, v.KeysPerPeer, v.ListenerKeys, v.EstablishedKeys, v.Peers)
	t.f("   RSS of the process with the daemon running %s  %s", Bytes(v.RSSDaemon), v.RSSVerdict())
	t.f("   (the process also holds the bench's %d client and %d accepted sockets: %s with the daemon stopped, so the daemon's share is %s;",
		v.Peers, v.Peers, Bytes(v.RSSHarness), Bytes(v.DaemonRSS()))
	t.f("    Go heap in use %s with the daemon, %s without; %s before the fleet existed)", Bytes(v.HeapDaemon), Bytes(v.HeapHarness), Bytes(v.RSSBefore))
	if v.GoroutinesDaemon > 0 {
		t.f("   goroutine stacks %s in %d goroutines with the daemon, %s in %d without", Bytes(v.StackDaemon), v.GoroutinesDaemon, Bytes(v.StackHarness), v.GoroutinesHarness)
	}
	if v.RSSScraped > 0 {
		t.f("   after the scrapes below (every series created): RSS %s (daemon's share %s), Go heap %s", Bytes(v.RSSScraped), Bytes(v.RSSScraped-v.RSSHarness), Bytes(v.HeapScraped))
	}
	t.f("   CPU per idle reconcile pass (a key source read that finds nothing new; getrusage self over %d passes, %d full passes in that window): %s  %s",
		v.IdlePasses, v.FullDuringIdle, Dur(v.IdlePassCPU), PassVerdict(v.IdlePassCPU))
	for _, b := range goBench {
		if cpu, ok := b.Extra[UnitCPUPerPass]; ok && strings.HasPrefix(b.Name, "BenchmarkIdlePass") {
			t.f("   the same on the %s's CPU (daemon %s, in-memory kernel: an idle pass reads no socket) [median of %d]: %s  %s",
				b.Where, b.Name, b.Runs, Dur(int64(cpu)), PassVerdict(int64(cpu)))
		}
	}
	t.f("   CPU per full pass with nothing changed (drift check: the listener's %d keys re-read and compared; every Resync, default 30s): %s [%d passes]",
		v.ListenerKeys, Dur(v.FullPassCPU), v.FullPasses)
	t.f("   CPU per change pass (an input changed: every peer's desired state recomputed, listener re-read): %s [%d passes; the %d idle passes between them taken out]",
		Dur(v.ChangePassCPU), v.ChangePasses, v.IdleBetweenChange)
	t.f("   idle as operators run it (defaults: steady re-reads every 30s per session, full pass every 30s, key source read every 30s; metrics on, not scraped): %s CPU per second (%.2f%% of one CPU, over %s)",
		Dur(v.SteadyCPUPerSec), float64(v.SteadyCPUPerSec)/1e7, Dur(v.SteadyWindow))
	each := medianOf(v.ScrapeCPUs, "15s apart")
	t.f("   one metrics scrape as Prometheus gets it, 15s after the last (text format, %d bytes; counters served from the rotation machines' reads, the kernel read on scrape only where they are stale): %s CPU, %s wall%s; the first scrape (every series created): %s CPU",
		v.ScrapeBytes, Dur(v.ScrapeCPU), Dur(v.ScrapeWall), each, Dur(v.ScrapeFirstCPU))
	gathers := medianOf(v.ScrapeGatherCPUs, "in a row")
	t.f("   one gather for a protobuf scrape (%d metric families, %d series; encoding not included): %s CPU%s",
		v.ScrapeFamilies, v.ScrapeSeries, Dur(v.ScrapeGatherCPU), gathers)
	t.f("   set-up: the daemon installed the listener's %d keys in %s; %d sessions connected and taken over (all steady) in %s",
		v.ListenerKeys, Dur(v.StartUp), v.Peers, Dur(v.Takeover))
	t.f("")
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// medianOf is " [median of N, how: a, b, c]" for several samples, "" for
// fewer than two.
func medianOf(xs []int64, how string) string {
	if len(xs) < 2 {
		return ""
	}
	ds := make([]string, len(xs))
	for i, x := range xs {
		ds[i] = Dur(x)
	}
	return fmt.Sprintf(" [median of %d, %s: %s]", len(xs), how, strings.Join(ds, ", "))
}
