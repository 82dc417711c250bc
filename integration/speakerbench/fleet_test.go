package speakerbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// Environment: the fleet sizes (unset: the test skips) and where to put
// fleet.txt and fleet.json.
const (
	envSizes = "AOKEYD_FLEET_SIZES"
	envOut   = "AOKEYD_FLEET_OUT"
	// envAokeyd and envAoctl name other aokeyd and aoctl binaries (in PATH
	// or a path) to measure instead, e.g. an older main's for the
	// before/after table. Such an aokeyd is not profiled (it may not know
	// SIGUSR2) and its RPCs are gobgpd's count (it may not count its own).
	envAokeyd = "AOKEYD_FLEET_AOKEYD"
	envAoctl  = "AOKEYD_FLEET_AOCTL"
	// envProfile=1 has aokeyd (this tree's, not envAokeyd's) write a CPU
	// profile of the fleet roll. Off by default: the profiler's signals
	// (100 a second per busy thread) are work only the profiled binary
	// does, and it was always the new one of a before/after pair. Its cost
	// is within these runs' noise (the profiled binary's roll CPU at N=64
	// was 0.53, 0.55 and 0.80 s in three boots, the unprofiled one's 0.67,
	// 0.68 and 0.41 s), but a figure of the daemon is taken unprofiled.
	envProfile = "AOKEYD_FLEET_PROFILE"
	// steadyWindow is how long aokeyd's idle CPU is measured: one full
	// -steady-poll and -resync period (both 30 s by default).
	steadyWindow = 30 * time.Second
)

// result is one fleet size's figures (fleet.json).
type result struct {
	N             int                `json:"n"`
	SetupS        float64            `json:"setup_s"`                 // routers up, every session established and keyed
	SoloRollMs    float64            `json:"solo_roll_ms"`            // baseline peers: key change to done, the median
	SoloRollsMs   []float64          `json:"solo_rolls_ms"`           // ... each baseline peer's, in turn
	SoloSwitchMs  float64            `json:"solo_switch_ms"`          // baseline peers: key change to new key current, the median
	FleetRollMs   float64            `json:"fleet_roll_ms"`           // key change to the last fleet peer done
	FleetSwitchMs float64            `json:"fleet_switch_ms"`         // key change to the last fleet peer's new key current
	FleetMedianMs float64            `json:"fleet_median_ms"`         // median fleet peer done
	RollRatio     float64            `json:"roll_ratio"`              // FleetRollMs / SoloRollMs
	LoggedRollMs  float64            `json:"logged_roll_ms"`          // key change to aokeyd's last fleet "roll complete" log line
	BirdSoloMs    float64            `json:"bird_configure_solo_ms"`  // birdc configure at the solo instant
	BirdFleetMs   float64            `json:"bird_configure_fleet_ms"` // birdc configure at the fleet instant
	SoloRPCs      float64            `json:"solo_rpcs"`               // gobgpd RPCs aokeyd issued over the baseline roll
	FleetRPCs     map[string]float64 `json:"fleet_rpcs"`              // ... over the fleet roll, by method
	RPCsPerPeer   float64            `json:"rpcs_per_peer"`           // aokeyd's count (gobgpd's with AOKEYD_FLEET_AOKEYD)
	// gobgpd's own count of the gRPC calls it served (grpc_server_started_total)
	SoloGobgpdRPCs    float64            `json:"solo_gobgpd_rpcs"`
	FleetGobgpdRPCs   map[string]float64 `json:"fleet_gobgpd_rpcs"`
	GobgpdRPCsPerPeer float64            `json:"gobgpd_rpcs_per_peer"`
	RollCPUs          float64            `json:"roll_cpu_s"`         // aokeyd CPU from the key change to the last peer done
	SteadyCPUPerS     float64            `json:"steady_cpu_s_per_s"` // aokeyd idle CPU seconds per second
	SteadyGobgpdPerS  float64            `json:"steady_gobgpd_cpu_s_per_s"`
	SteadyBirdPerS    float64            `json:"steady_bird_cpu_s_per_s"`
	GuestCPUs         int                `json:"guest_cpus"`
	SteadyIdleCPUs    float64            `json:"steady_idle_cpus"`   // the guest's CPUs idle on average, steady window
	NotHeld           string             `json:"not_held,omitempty"` // why the guest does not hold the size (see holds)
	Flaps             int                `json:"flaps"`
	PktBad            uint64             `json:"pkt_bad"`         // TCPAOBad, both routers, from established to the end
	KeyNotFound       uint64             `json:"key_not_found"`   // TCPAOKeyNotFound, both routers, same span
	RevokeMs          float64            `json:"revoke_ms"`       // aoctl revoke start to the last socket seen clean
	RevokeAoctlMs     float64            `json:"revoke_aoctl_ms"` // aoctl revoke start to its exit
	AokeydRSSKiB      int                `json:"aokeyd_rss_kib"`
	complete          bool
	GobgpdRSSKiB      int `json:"gobgpd_rss_kib"`
}

func (r result) line() string {
	return fmt.Sprintf("fleet: n=%d roll_ratio=%.2f rpcs_per_peer=%.1f flaps=%d pkt_bad=%d revoke_ms=%d",
		r.N, r.RollRatio, r.RPCsPerPeer, r.Flaps, r.PktBad, int64(r.RevokeMs+0.5))
}

// TestFleet is the real-speaker item of `make bench` (see the package doc).
func TestFleet(t *testing.T) {
	spec := os.Getenv(envSizes)
	if spec == "" {
		t.Skipf("%s unset: the real-speaker fleet bench runs from `make bench` (e.g. %s=64,256,512)", envSizes, envSizes)
	}
	// Not kerneltest's Require: the Makefile takes a package that calls it for
	// make test-kernel, which runs without AOKEYD_FLEET_SIZES.
	if !kerneltest.InGuest() {
		t.Skipf("%s set, but the fleet bench runs in the TCP-AO guest VM (make bench)", envSizes)
	}
	lab.RequireNetns(t)
	useBinaries(t)
	sizes := parseSizes(t, envSizes, spec)
	force := forced(t)
	var results []result
	var prev *result // the last size measured
	for _, n := range sizes {
		var r result
		ok := t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { r = runFleet(t, n, prev, force) })
		if r.complete { // measured, though a check may have failed (flaps)
			results = append(results, r)
			fmt.Println(r.line())
			record(t, results)
			prev = &results[len(results)-1]
		} else if ok && r.NotHeld != "" {
			results = append(results, r)
			fmt.Println(r.notHeldLine())
			record(t, results)
			t.Logf("the fleet bench stops at N=%d: the guest does not hold it; larger sizes not tried (%s=1 rolls them anyway)", n, envForce)
			break
		}
		if !ok {
			t.Logf("the fleet bench stops at N=%d (see the subtest's failure above); larger sizes not tried", n)
			break
		}
	}
}

// record writes fleet.txt and fleet.json into $AOKEYD_FLEET_OUT.
func record(t *testing.T, rs []result) {
	dir := os.Getenv(envOut)
	if dir == "" {
		return
	}
	var lines strings.Builder
	for _, r := range rs {
		if r.complete {
			lines.WriteString(r.line() + "\n")
		} else {
			lines.WriteString(r.notHeldLine() + "\n")
		}
	}
	writeResults(t, dir, "fleet", lines.String(), rs)
}

// keysRolling is a chain that rolls at `at`: k1 sends until then (and is
// accepted a second longer), k2 is sent and accepted from then on, so A
// holds no k2 before (see birdKeys); k3 is the backup, sendable with an
// older send start, so never chosen while k1 or k2 may send.
func keysRolling(now, at time.Time) []key {
	return []key{
		{i: 1, sendStart: now.Add(-time.Hour), sendEnd: at, acceptEnd: at.Add(time.Second)},
		{i: 2, sendStart: at, acceptStart: at},
		{i: 3, sendStart: now.Add(-2 * time.Hour)},
	}
}

// runFleet measures a fleet of n; prev is the last size measured (nil for
// the first), for the check that the guest holds n (see holds), which
// force overrides.
func runFleet(t *testing.T, n int, prev *result, force bool) result {
	r := result{N: n}
	begin := time.Now()
	f := newBench(t, n)
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	unrolled := make([][]key, len(solos))
	for i := range unrolled {
		unrolled[i] = keysRolling(begin, far)
	}
	f.writeKeys(keysRolling(begin, far), unrolled...)
	if dir := os.Getenv(envOut); dir != "" && os.Getenv(envAokeyd) == "" {
		// aokeyd profiles the fleet roll (window 1) and the revoke (window
		// 2): SIGUSR2 opens and closes each.
		switch os.Getenv(envProfile) {
		case "1", "cpu":
			t.Setenv("AOKEYD_CPUPROFILE", filepath.Join(dir, fmt.Sprintf("fleet-aokeyd-n%d-w%%d.pprof", n)))
			f.profiling = true
		case "trace":
			t.Setenv("AOKEYD_EXECTRACE", filepath.Join(dir, fmt.Sprintf("fleet-aokeyd-n%d-w%%d.trace", n)))
			f.profiling = true
		}
	}
	f.startAokeyd()
	f.bird = startBird(f)
	t.Cleanup(func() { f.diagnose(t) })
	scale := time.Duration(n) * 400 * time.Millisecond // the emulated CPU brings a few sessions up a second
	lastLog := time.Now()
	if err := lab.Within(90*time.Second+scale, fmt.Sprintf("all %d sessions established", len(f.all())), func() (bool, string) {
		ss, err := f.sessions()
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, s := range ss {
			if s.up {
				up++
			}
		}
		if time.Since(lastLog) >= 20*time.Second {
			// Where a large fleet's set-up stands, and who has the CPU.
			lastLog = time.Now()
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("n=%d: set-up at %.0fs: %d of %d sessions up; CPU so far: aokeyd %v, gobgpd %v, BIRD %v; RSS KiB: gobgpd %d, BIRD %d; loadavg %s",
				n, time.Since(begin).Seconds(), up, len(f.all()), cpuOr(f.aokeyd.Process.Pid), cpuOr(f.gobgp.PID), cpuOr(f.bird.pid),
				rssKiB(f.gobgp.PID), rssKiB(f.bird.pid), strings.TrimSpace(string(load)))
		}
		return up == len(f.all()), fmt.Sprintf("%d of %d up; BIRD: %s", up, len(f.all()), f.bird.summary())
	}); err != nil {
		t.Fatalf("%v\n%s", err, f.stuck(3))
	}
	if _, _, err := f.pollUntil(f.all(), begin, 60*time.Second+scale, "k1 and k3 on every socket, k1 current", carries(1, 1, 3), nil); err != nil {
		t.Fatal(err)
	}
	// BIRD's operator gives it k2, preferred, ahead of the roll.
	if err := f.bird.configure(true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if _, _, err := f.pollUntil(f.all(), begin, 10*time.Second, "k1 current and no k2 on A once BIRD prefers k2", carries(1, 1, 3), nil); err != nil {
		t.Fatal(err)
	}
	before, err := f.sessions()
	if err != nil {
		t.Fatal(err)
	}
	if nf, first := flaps(before, before); nf != 0 {
		t.Fatalf("%d sessions not up before the rolls: %s", nf, first)
	}
	// Connections that died in the set-up (BIRD's and gobgpd's
	// collisions) leave closing sockets whose retransmitted FINs reach
	// the other side's listener, which cannot verify them (it knows no
	// ISNs): TCPAOBad rose by 14 in one run's steady window and 7 over its
	// baseline rolls, before aokeyd changed a key. The bad segments counted
	// are the rolls' and the revoke's: the window starts once no socket on
	// port 179 is closing (tcp_orphan_retries=1 in both namespaces, set at
	// the start, has the kernel give such sockets up after one retry).
	f.settle()
	r.SetupS = time.Since(begin).Seconds()
	extA0, extB0 := counters(t, f)
	// Where bad segments (TCPAOBad) and unknown keys come from: the
	// counters' rise over each phase, logged.
	prevA, prevB := extA0, extB0
	phase := func(name string) {
		a, b := counters(t, f)
		t.Logf("n=%d: %s: TCPAOBad +%d/+%d, TCPAOKeyNotFound +%d/+%d (A/B)", n, name,
			a["TCPAOBad"]-prevA["TCPAOBad"], b["TCPAOBad"]-prevB["TCPAOBad"],
			a["TCPAOKeyNotFound"]-prevA["TCPAOKeyNotFound"], b["TCPAOKeyNotFound"]-prevB["TCPAOKeyNotFound"])
		if a["TCPAOBad"] > prevA["TCPAOBad"] {
			// Which sessions: their own counters, cumulative.
			t.Logf("n=%d: %s: A's %s", n, name, f.badSockets(8))
			// Segments to A's listener that fail verification come from
			// connections A no longer has: BIRD's sockets to port 179
			// that are neither established nor listening say which.
			t.Logf("n=%d: %s: %s", n, name, f.strayConnections(12))
		}
		prevA, prevB = a, b
	}
	pid := f.aokeyd.Process.Pid
	t.Logf("n=%d: set up in %.0fs; aokeyd RSS %d KiB, gobgpd RSS %d KiB", n, r.SetupS, rssKiB(pid), rssKiB(f.gobgp.PID))

	// Steady state: nothing due.
	c0, gobgpd0, bird0 := mustCPU(t, pid), cpuOr(f.gobgp.PID), cpuOr(f.bird.pid)
	guest0, err := readGuestCPU()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(steadyWindow)
	guest1, err := readGuestCPU()
	if err != nil {
		t.Fatal(err)
	}
	r.SteadyCPUPerS = (mustCPU(t, pid) - c0).Seconds() / steadyWindow.Seconds()
	r.SteadyGobgpdPerS = (cpuOr(f.gobgp.PID) - gobgpd0).Seconds() / steadyWindow.Seconds()
	r.SteadyBirdPerS = (cpuOr(f.bird.pid) - bird0).Seconds() / steadyWindow.Seconds()
	r.GuestCPUs, r.SteadyIdleCPUs = guest1.cpus, idleCPUs(guest0, guest1)
	t.Logf("n=%d: steady CPU per second: aokeyd %.4f, gobgpd %.3f, BIRD %.3f; the guest's %d CPUs %.2f idle", n, r.SteadyCPUPerS,
		r.SteadyGobgpdPerS, r.SteadyBirdPerS, r.GuestCPUs, r.SteadyIdleCPUs)
	phase("steady window")
	if why, ok := holds(r, prev); !ok {
		r.NotHeld = why
		if !force && n > alwaysRolled {
			t.Logf("n=%d: the guest does not hold it, not rolled: %s", n, why)
			return r
		}
		t.Logf("n=%d: the guest does not hold it, rolled anyway (%s=1, or n <= %d): %s", n, envForce, alwaysRolled, why)
	}

	// The schedule: each baseline peer rolls alone in turn, solos[i] at
	// t0 + i*soloGap, then the fleet at t1. The single-peer roll time is
	// the baseline peers' median.
	ka := time.Duration(keepalive(n)) * time.Second
	soloGap := 8 * ka
	t0 := time.Now().Add(5 * time.Second).Truncate(time.Second)
	t1 := t0.Add(time.Duration(len(solos))*soloGap + 4*time.Second)
	var soloKeys [][]key
	for i := range solos {
		soloKeys = append(soloKeys, keysRolling(begin, t0.Add(time.Duration(i)*soloGap)))
	}
	f.writeKeys(keysRolling(begin, t1), soloKeys...)
	rpc0, g0 := f.rpcs(), f.gobgpdRPCs()
	t.Logf("n=%d: gobgpd RPCs by aokeyd so far: %v", n, rpc0)
	var soloSwitch []float64
	var solo []string
	for i, a := range solos {
		ti := t0.Add(time.Duration(i) * soloGap)
		time.Sleep(time.Until(ti))
		done, marks, err := f.pollUntil([]netip.Addr{a}, ti, soloGap-time.Second, fmt.Sprintf("baseline peer %s's roll", a), rolled(1, 2), rollMarks)
		if err != nil {
			t.Fatal(err)
		}
		r.SoloRollsMs = append(r.SoloRollsMs, ms(last(done)))
		soloSwitch = append(soloSwitch, ms(last(marks["switched"])))
		solo = append(solo, fmt.Sprintf("%s: %s", a, timeline(done, marks)))
	}
	r.SoloRollMs, r.SoloSwitchMs = median(r.SoloRollsMs), median(soloSwitch)
	st := time.Now()
	rpc1 := f.rpcs()
	scrapeA := time.Since(st)
	g1 := f.gobgpdRPCs()
	scrapeG := time.Since(st) - scrapeA
	r.SoloRPCs = (sum(rpc1) - sum(rpc0)) / float64(len(solos))
	phase("the baseline peers' rolls")
	r.SoloGobgpdRPCs = (sum(g1) - sum(g0)) / float64(len(solos))
	// The fleet's key change is in the key file already: a bench that
	// reaches it late would start its reads (and aokeyd's CPU count) after
	// the roll began, or ended, and report that as the roll (a 512-peer
	// run once read every peer done at its first read, 6.6 s late).
	lead := time.Until(t1)
	t.Logf("n=%d: the fleet's key change in %v (aokeyd's metrics scrape took %v, gobgpd's %v)", n, lead.Round(time.Millisecond),
		scrapeA.Round(time.Millisecond), scrapeG.Round(time.Millisecond))
	if lead < 500*time.Millisecond {
		t.Fatalf("the bench reached the fleet's key change %v late: its reads would miss the roll's start", -lead.Round(time.Millisecond))
	}
	time.Sleep(lead)
	f.toggleProfile() // aokeyd's profile window opens
	c1, own1, reads1, readTime1, lisTime1 := mustCPU(t, pid), mustCPU(t, os.Getpid()), f.reads, f.readTime, f.listenerTime
	gcpu1, bcpu1, sw1 := cpuOr(f.gobgp.PID), cpuOr(f.bird.pid), switches(pid)
	done, marks, err := f.pollUntil(f.peers, t1, 2*time.Minute+scale, "the fleet's roll", rolled(1, 2), rollMarks)
	r.RollCPUs = (mustCPU(t, pid) - c1).Seconds()
	f.toggleProfile()
	ownCPU, reads := mustCPU(t, os.Getpid())-own1, f.reads-reads1
	sw2 := switches(pid)
	t.Logf("n=%d: the bench's own reads of the kernel over the fleet roll: %d, %.0f ms each on average (%.0f ms of it the listener's), bench CPU %.2fs; gobgpd CPU %.2fs, BIRD CPU %.2fs; aokeyd threads %d (were %d), context switches +%d voluntary, +%d involuntary",
		n, reads, ms(f.readTime-readTime1)/float64(max(reads, 1)), ms(f.listenerTime-lisTime1)/float64(max(reads, 1)), ownCPU.Seconds(), (cpuOr(f.gobgp.PID) - gcpu1).Seconds(), (cpuOr(f.bird.pid) - bcpu1).Seconds(),
		sw2.threads, sw1.threads, sw2.vol-sw1.vol, sw2.invol-sw1.invol)
	if err != nil {
		t.Fatal(err)
	}
	rpc2, g2 := f.rpcs(), f.gobgpdRPCs()
	r.FleetRPCs, r.FleetGobgpdRPCs = diff(rpc2, rpc1), diff(g2, g1)
	r.RPCsPerPeer = sum(r.FleetRPCs) / float64(n)
	r.GobgpdRPCsPerPeer = sum(r.FleetGobgpdRPCs) / float64(n)
	if os.Getenv(envAokeyd) != "" {
		r.RPCsPerPeer = r.GobgpdRPCsPerPeer
	}
	r.FleetRollMs, r.FleetSwitchMs = ms(last(done)), ms(last(marks["switched"]))
	r.FleetMedianMs = ms(quantile(done, 0.5))
	r.RollRatio = r.FleetRollMs / r.SoloRollMs
	t.Logf("n=%d: baseline peers, each alone: done at %v ms (median %.0f), %.1f RPCs each (gobgpd counted %.1f); %s", n, r.SoloRollsMs, r.SoloRollMs, r.SoloRPCs, r.SoloGobgpdRPCs, strings.Join(solo, "; "))
	t.Logf("n=%d: fleet: last done at %.0f ms, RPCs %v (gobgpd counted %v), aokeyd CPU %.2fs over the roll; %s", n, r.FleetRollMs, r.FleetRPCs, r.FleetGobgpdRPCs, r.RollCPUs, timeline(done, marks))
	// The reads' resolution, against aokeyd's own account: when it logged
	// each fleet peer's roll complete (its last write, the old key's
	// delete), since the key change. When the guest is busy the reads, at
	// nice 19, come far apart, and a peer is seen done up to one read late.
	if logged, err := f.rollsLogged(t1); err != nil {
		t.Logf("n=%d: aokeyd's log: %v", n, err)
	} else {
		r.LoggedRollMs = ms(last(logged))
		t.Logf("n=%d: aokeyd logged %d fleet peers' roll complete, the last at %.0f ms (median %.0f ms); the bench saw the last done at %.0f ms",
			n, len(logged), r.LoggedRollMs, ms(quantile(logged, 0.5)), r.FleetRollMs)
	}
	time.Sleep(2 * ka) // keepalives flow on the new keys
	phase("the fleet's roll")
	check(t, f, before, "after the roll")
	revoke(t, f, &r, scale)
	time.Sleep(3 * ka) // keepalives flow on k3
	phase("the revoke")
	r.Flaps = check(t, f, before, "after the revoke")
	extA1, extB1 := counters(t, f)
	r.PktBad = extA1["TCPAOBad"] - extA0["TCPAOBad"] + extB1["TCPAOBad"] - extB0["TCPAOBad"]
	r.KeyNotFound = extA1["TCPAOKeyNotFound"] - extA0["TCPAOKeyNotFound"] + extB1["TCPAOKeyNotFound"] - extB0["TCPAOKeyNotFound"]
	r.AokeydRSSKiB, r.GobgpdRSSKiB = rssKiB(pid), rssKiB(f.gobgp.PID)
	t.Logf("n=%d: flaps %d, TCPAOBad %d, TCPAOKeyNotFound %d; steady aokeyd CPU %.4f s/s; RSS aokeyd %d KiB, gobgpd %d KiB",
		n, r.Flaps, r.PktBad, r.KeyNotFound, r.SteadyCPUPerS, r.AokeydRSSKiB, r.GobgpdRSSKiB)
	r.complete = true
	return r
}

// diagnose keeps aokeyd's log with the results (for a look at its
// timeline) and, when the test failed, prints what each router says.
func (f *bench) diagnose(t *testing.T) {
	if !diagnoseAokeyd(t, f.dir, fmt.Sprintf("fleet-aokeyd-n%d.log", f.n)) {
		return
	}
	t.Logf("BIRD: %s\nbird.log (tail):\n%s\nbird's output:\n%s", f.bird.summary(), lab.Tail(filepath.Join(f.bird.dir, "bird.log"), 4000),
		lab.Tail(filepath.Join(f.bird.dir, "stdout.log"), 4000))
	a, _ := tcpExt(f.a)
	b, _ := tcpExt(f.b)
	for _, c := range []string{"TCPAOGood", "TCPAOBad", "TCPAOKeyNotFound", "TCPAORequired", "TCPAODroppedIcmps"} {
		t.Logf("%s: A %d, B %d", c, a[c], b[c])
	}
	kv, err := f.readKernel(nil, false, true)
	t.Logf("gobgpd's listener: keys for %d peer prefixes (%v)", len(kv.listener), err)
}

// rollMarks are the steps of a roll timed besides done: the new key
// current on the session (the kernel switches it when BIRD's RNext asks for
// it), the old key gone from the session, from the listener.
var rollMarks = map[string]pred{"switched": switched(2), "socket": socketRolled(1, 2), "listener": listenerRolled(1, 2)}

// timeline renders when the peers reached each step of the roll: first,
// median and last, since the key change.
func timeline(done map[netip.Addr]time.Duration, marks map[string]map[netip.Addr]time.Duration) string {
	q := func(at map[netip.Addr]time.Duration) string {
		return fmt.Sprintf("%.0f/%.0f/%.0f", ms(quantile(at, 0)), ms(quantile(at, 0.5)), ms(quantile(at, 1)))
	}
	return fmt.Sprintf("first/median/last ms: switched %s, socket rolled %s, listener rolled %s, done %s",
		q(marks["switched"]), q(marks["socket"]), q(marks["listener"]), q(done))
}

// check counts the sessions that flapped since before (reported, not
// fatal: the figure is the bench's output).
func check(t *testing.T, f *bench, before map[netip.Addr]session, when string) int {
	now, err := f.sessions()
	if err != nil {
		t.Fatal(err)
	}
	n, first := flaps(before, now)
	if n > 0 {
		t.Errorf("%s: %d sessions flapped, e.g. %s", when, n, first)
	}
	return n
}

func counters(t *testing.T, f *bench) (a, b map[string]uint64) {
	a, err := tcpExt(f.a)
	if err != nil {
		t.Fatal(err)
	}
	b, err = tcpExt(f.b)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func diff(after, before map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for m, v := range after {
		if x := v - before[m]; x != 0 {
			d[m] = x
		}
	}
	return d
}

// useBinaries puts the aokeyd and aoctl of $AOKEYD_FLEET_AOKEYD and
// $AOKEYD_FLEET_AOCTL first in PATH under their usual names.
func useBinaries(t *testing.T) {
	dir := ""
	for name, env := range map[string]string{"aokeyd": envAokeyd, "aoctl": envAoctl} {
		v := os.Getenv(env)
		if v == "" {
			continue
		}
		p, err := exec.LookPath(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		if p, err = filepath.Abs(p); err != nil {
			t.Fatal(err)
		}
		if dir == "" {
			dir = t.TempDir()
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		t.Logf("measuring %s %s (%s)", name, p, env)
	}
	if dir != "" {
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
}

// toggleProfile opens or closes aokeyd's profile window (SIGUSR2: a CPU
// profile or an execution trace), when the bench set AOKEYD_CPUPROFILE or
// AOKEYD_EXECTRACE for it.
func (f *bench) toggleProfile() {
	if f.profiling {
		_ = f.aokeyd.Process.Signal(syscall.SIGUSR2)
	}
}

// rollsLogged reads, from aokeyd's JSON log, when it logged each fleet
// peer's last roll complete, since at.
func (f *bench) rollsLogged(at time.Time) (map[netip.Addr]time.Duration, error) {
	fh, err := os.Open(filepath.Join(f.dir, "aokeyd.log"))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fleet := map[netip.Addr]bool{}
	for _, p := range f.peers {
		fleet[p] = true
	}
	out := map[netip.Addr]time.Duration{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"rotator: roll complete"`) {
			continue
		}
		var l struct {
			Time time.Time `json:"time"`
			Peer string    `json:"peer"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Time.Before(at) {
			continue
		}
		if a, err := netip.ParseAddr(l.Peer); err == nil && fleet[a] {
			out[a] = l.Time.Sub(at)
		}
	}
	return out, sc.Err()
}

// settleWait bounds settle: a socket stays in TIME-WAIT for 60 s after its
// close, and at 1,000 route-server members the set-up's last collision
// (two BIRDs connecting to each other at once) came seconds before settle
// began; a minute was missed by two such sockets.
const settleWait = 3 * time.Minute

// settle waits until neither namespace has a socket on port 179 that is
// closing (a TIME-WAIT socket sends nothing of its own), up to settleWait.
func (f *bench) settle() {
	t := f.t
	st := time.Now()
	lab.Eventually(t, settleWait, "no closing socket on port 179", func() (bool, string) {
		n := 0
		for _, ns := range []*netns.NS{f.a, f.b} {
			lines, err := port179(ns, true)
			if err != nil {
				return false, err.Error()
			}
			n += len(lines)
		}
		return n == 0, fmt.Sprintf("%d closing sockets", n)
	})
	if d := time.Since(st); d > time.Second {
		t.Logf("n=%d: the set-up's closing sockets were gone after %v", f.n, d.Round(time.Millisecond))
	}
}
