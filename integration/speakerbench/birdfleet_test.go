package speakerbench

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// envBirdFleetSizes names the bird-fleet item's sizes (unset: the test
// skips). Its results go where the fleet item's do (envOut).
const envBirdFleetSizes = "AOKEYD_BIRDFLEET_SIZES"

// birdResult is one bird-fleet size's figures (birdfleet.json).
type birdResult struct {
	N      int     `json:"n"`
	SetupS float64 `json:"setup_s"` // both BIRDs and aokeyd up, every session established on k1, the members armed
	// The roll: from the key change (k2 sendable) until the last member's
	// route server socket and listener entry hold k2, not k1, and k2 is
	// current (RollS), and its configures: BIRD's configures aokeyd made
	// from just before the key change until every member sends with k2
	// (aokeyd_speaker_rpcs_total{method="birdc configure"}), and each one
	// BIRD took as "files@ms" (aokeyd's "BIRD reconfigured" lines).
	RollS          float64  `json:"roll_s"`
	RollMedianS    float64  `json:"roll_median_s"`
	RollSwitchS    float64  `json:"roll_switch_s"` // key change to the last member's k2 current on the route server
	Configures     float64  `json:"configures"`
	ConfiguresDone float64  `json:"configures_at_done"` // ... counted when the last member was seen done
	Reconfigured   []string `json:"reconfigured"`
	// CPU seconds over the roll (key change to the last member done):
	// aokeyd, the route server BIRD, the members' BIRD.
	RollAokeydCPUs  float64 `json:"roll_aokeyd_cpu_s"`
	RollRSBirdCPUs  float64 `json:"roll_rs_bird_cpu_s"`
	RollMemBirdCPUs float64 `json:"roll_members_bird_cpu_s"`
	// CPU seconds per second with nothing due (steadyWindow).
	SteadyAokeydPerS float64 `json:"steady_aokeyd_cpu_s_per_s"`
	SteadyRSBirdPerS float64 `json:"steady_rs_bird_cpu_s_per_s"`
	SteadyIdleCPUs   float64 `json:"steady_idle_cpus"`
	// The revoke of shared/k2 (k3 the backup): from aoctl's start until no
	// route server socket nor listener entry holds k2.
	RevokeMs         float64        `json:"revoke_ms"`
	RevokeAoctlMs    float64        `json:"revoke_aoctl_ms"`
	RevokeConfigures float64        `json:"revoke_configures"`
	RevokeReconfig   []string       `json:"revoke_reconfigured"` // as Reconfigured, from the roll's end to the members on k3
	RevokeActions    map[string]int `json:"revoke_actions"`
	RevokeAokeydCPUs float64        `json:"revoke_aokeyd_cpu_s"`
	RevokeRSBirdCPUs float64        `json:"revoke_rs_bird_cpu_s"`
	Flaps            int            `json:"flaps"`
	PktBad           uint64         `json:"pkt_bad"`       // TCPAOBad, both namespaces, from the armed members to the end
	KeyNotFound      uint64         `json:"key_not_found"` // TCPAOKeyNotFound, same span
	AokeydRSSKiB     int            `json:"aokeyd_rss_kib"`
	RSBirdRSSKiB     int            `json:"rs_bird_rss_kib"`
	complete         bool
}

func (r birdResult) line() string {
	return fmt.Sprintf("bird-fleet: n=%d roll_s=%.1f configures=%d revoke_ms=%d flaps=%d pkt_bad=%d",
		r.N, r.RollS, int64(r.Configures+0.5), int64(r.RevokeMs+0.5), r.Flaps, r.PktBad)
}

// TestBirdFleet is the bird-fleet item of `make bench`: BIRD as a route
// server keyed by aokeyd's native executor (see the package doc).
func TestBirdFleet(t *testing.T) {
	spec := os.Getenv(envBirdFleetSizes)
	if spec == "" {
		t.Skipf("%s unset: the bird-fleet bench runs from `make bench` (e.g. %s=1000)", envBirdFleetSizes, envBirdFleetSizes)
	}
	if !kerneltest.InGuest() {
		t.Skipf("%s set, but the bird-fleet bench runs in the TCP-AO guest VM (make bench)", envBirdFleetSizes)
	}
	lab.RequireNetns(t)
	sizes := parseSizes(t, envBirdFleetSizes, spec)
	var results []birdResult
	for _, n := range sizes {
		var r birdResult
		ok := t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { r = runBirdFleet(t, n) })
		if r.complete { // measured, though a check may have failed (flaps)
			results = append(results, r)
			fmt.Println(r.line())
			recordBird(t, results)
		}
		if !ok {
			t.Logf("the bird-fleet bench stops at N=%d (see the subtest's failure above); larger sizes not tried", n)
			break
		}
	}
}

// recordBird writes birdfleet.txt and birdfleet.json into $AOKEYD_FLEET_OUT.
func recordBird(t *testing.T, rs []birdResult) {
	dir := os.Getenv(envOut)
	if dir == "" {
		return
	}
	var lines strings.Builder
	for _, r := range rs {
		lines.WriteString(r.line() + "\n")
	}
	writeResults(t, dir, "birdfleet", lines.String(), rs)
}

// runBirdFleet measures a route server of n members.
func runBirdFleet(t *testing.T, n int) birdResult {
	r := birdResult{N: n}
	begin := time.Now()
	f := newRSFleet(t, n)
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	f.writeKeys(keysRolling(begin, far))
	// aokeyd profiles the revoke, or traces it (window 1; SIGUSR2 opens
	// and closes it).
	switch dir, p := os.Getenv(envOut), os.Getenv(envProfile); {
	case dir != "" && (p == "1" || p == "cpu"):
		t.Setenv("AOKEYD_CPUPROFILE", filepath.Join(dir, fmt.Sprintf("birdfleet-aokeyd-n%d-w%%d.pprof", n)))
		f.profiling = true
	case dir != "" && p == "trace":
		t.Setenv("AOKEYD_EXECTRACE", filepath.Join(dir, fmt.Sprintf("birdfleet-aokeyd-n%d-w%%d.trace", n)))
		f.profiling = true
	}
	f.startAokeyd()
	f.rs = f.startBirdIn("rs", true, f.writeRS)
	f.sockPID = f.rs.pid
	f.members = f.startBirdIn("members", false, func(dir string) error { return f.writeMembers(dir, false) })
	t.Cleanup(func() { f.diagnoseBird(t) })
	scale := time.Duration(n) * 400 * time.Millisecond // the emulated CPU brings a few sessions up a second
	lastLog := time.Now()
	if err := lab.Within(90*time.Second+scale, fmt.Sprintf("all %d members established", n), func() (bool, string) {
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
		if time.Since(lastLog) > 30*time.Second {
			t.Logf("n=%d: %d of %d members established after %v", n, up, n, time.Since(begin).Round(time.Second))
			lastLog = time.Now()
		}
		return up == n, fmt.Sprintf("%d of %d established; route server: %s; members: %s", up, n, f.rs.summary(), f.members.summary())
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.pollUntil(f.peers, begin, 60*time.Second+scale, "k1 and k3 on every route server socket, k1 current", carries(1, 1, 3), nil); err != nil {
		t.Fatal(err)
	}
	// The members' operators give their BIRD k2, preferred, ahead of the
	// roll; the route server, without k2, keeps sending with k1.
	if err := f.armMembers(60*time.Second + scale/4); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.pollUntil(f.peers, begin, 10*time.Second+scale/10, "k1 current and no k2 on the route server once the members prefer k2", carries(1, 1, 3), nil); err != nil {
		t.Fatal(err)
	}
	before, err := f.sessions()
	if err != nil {
		t.Fatal(err)
	}
	if nf, first := memberFlaps(before, before); nf != 0 {
		t.Fatalf("%d sessions not up before the roll: %s", nf, first)
	}
	f.settle()
	r.SetupS = time.Since(begin).Seconds()
	extA0, extB0 := counters(t, f.bench)
	pid := f.aokeyd.Process.Pid
	t.Logf("n=%d: set up in %.0fs; aokeyd RSS %d KiB, route server BIRD RSS %d KiB, members' BIRD RSS %d KiB", n, r.SetupS,
		rssKiB(pid), rssKiB(f.rs.pid), rssKiB(f.members.pid))

	// Steady state: nothing due.
	c0, rs0 := mustCPU(t, pid), cpuOr(f.rs.pid)
	guest0, err := readGuestCPU()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(steadyWindow)
	guest1, err := readGuestCPU()
	if err != nil {
		t.Fatal(err)
	}
	r.SteadyAokeydPerS = (mustCPU(t, pid) - c0).Seconds() / steadyWindow.Seconds()
	r.SteadyRSBirdPerS = (cpuOr(f.rs.pid) - rs0).Seconds() / steadyWindow.Seconds()
	r.SteadyIdleCPUs = idleCPUs(guest0, guest1)
	t.Logf("n=%d: steady CPU per second: aokeyd %.4f, route server BIRD %.3f; the guest's %d CPUs %.2f idle", n,
		r.SteadyAokeydPerS, r.SteadyRSBirdPerS, guest1.cpus, r.SteadyIdleCPUs)

	// The roll: the shared chain's k2 sendable at t1, k1 sent until then
	// and accepted a second longer. The lead leaves aokeyd its refresh and
	// a pass over every member before t1.
	t1 := time.Now().Add(10*time.Second + time.Duration(n)*10*time.Millisecond).Truncate(time.Second)
	f.writeKeys(keysRolling(begin, t1))
	conf0 := f.configures()
	lead := time.Until(t1)
	if lead < 500*time.Millisecond {
		t.Fatalf("the bench reached the key change %v late: its reads would miss the roll's start", -lead.Round(time.Millisecond))
	}
	time.Sleep(lead) // until the scheduled instant
	c1, rs1, mem1 := mustCPU(t, pid), cpuOr(f.rs.pid), cpuOr(f.members.pid)
	done, marks, err := f.pollUntil(f.peers, t1, 2*time.Minute+scale, "the members' roll", rolled(1, 2), rollMarks)
	r.RollAokeydCPUs = (mustCPU(t, pid) - c1).Seconds()
	r.RollRSBirdCPUs = (cpuOr(f.rs.pid) - rs1).Seconds()
	r.RollMemBirdCPUs = (cpuOr(f.members.pid) - mem1).Seconds()
	if err != nil {
		t.Fatalf("%v\nconfigures so far %v: %v", err, f.configures()-conf0, f.reconfigured(t1.Add(-time.Second), time.Now()))
	}
	r.ConfiguresDone = f.configures() - conf0
	r.RollS, r.RollMedianS = last(done).Seconds(), quantile(done, 0.5).Seconds()
	r.RollSwitchS = last(marks["switched"]).Seconds()
	// The members send with k2 once the route server's RNext asks for it:
	// keepalives flow on the new key, both ways.
	if err := lab.Within(time.Minute+time.Duration(9*keepalive(n))*time.Second, "every member sending with k2", func() (bool, string) {
		return f.membersKeys(102, 2)
	}); err != nil {
		t.Fatal(err)
	}
	r.Configures = f.configures() - conf0
	rolledAt := time.Now()
	r.Reconfigured = f.reconfigured(t1.Add(-time.Second), rolledAt)
	t.Logf("n=%d: roll: last member done at %.1fs (median %.1fs), %.0f configures by then, %.0f once every member sent with k2 (files@ms: %v); CPU over the roll: aokeyd %.2fs, route server BIRD %.2fs, members' BIRD %.2fs; %s",
		n, r.RollS, r.RollMedianS, r.ConfiguresDone, r.Configures, r.Reconfigured, r.RollAokeydCPUs, r.RollRSBirdCPUs, r.RollMemBirdCPUs, timeline(done, marks))
	if nf, first := f.flapsNow(before); nf > 0 {
		t.Errorf("after the roll: %d sessions flapped, e.g. %s", nf, first)
	}

	f.toggleProfile()
	f.revokeShared(&r, scale)
	f.toggleProfile()
	if err := lab.Within(time.Minute+time.Duration(9*keepalive(n))*time.Second, "every member sending with k3", func() (bool, string) {
		return f.membersKeys(103, 2)
	}); err != nil {
		t.Fatal(err)
	}
	r.RevokeReconfig = f.reconfigured(rolledAt, time.Now())
	t.Logf("n=%d: revoke: BIRD reconfigured (files@ms since the roll's end): %v", n, r.RevokeReconfig)
	r.Flaps, _ = f.flapsNow(before)
	if r.Flaps > 0 {
		_, first := f.flapsNow(before)
		t.Errorf("after the revoke: %d sessions flapped, e.g. %s", r.Flaps, first)
	}
	extA1, extB1 := counters(t, f.bench)
	r.PktBad = extA1["TCPAOBad"] - extA0["TCPAOBad"] + extB1["TCPAOBad"] - extB0["TCPAOBad"]
	r.KeyNotFound = extA1["TCPAOKeyNotFound"] - extA0["TCPAOKeyNotFound"] + extB1["TCPAOKeyNotFound"] - extB0["TCPAOKeyNotFound"]
	r.AokeydRSSKiB, r.RSBirdRSSKiB = rssKiB(pid), rssKiB(f.rs.pid)
	t.Logf("n=%d: flaps %d, TCPAOBad %d, TCPAOKeyNotFound %d; RSS aokeyd %d KiB, route server BIRD %d KiB",
		n, r.Flaps, r.PktBad, r.KeyNotFound, r.AokeydRSSKiB, r.RSBirdRSSKiB)
	r.complete = true
	return r
}

// flapsNow counts the members whose session flapped since before.
func (f *rsFleet) flapsNow(before map[netip.Addr]memberSession) (int, string) {
	now, err := f.sessions()
	if err != nil {
		f.t.Fatal(err)
	}
	return memberFlaps(before, now)
}

// revokeShared runs `aoctl revoke shared/k2` (every member's current key,
// k3 the backup on both sides) while reading the route server's sockets,
// from the command's start until none carries k2.
func (f *rsFleet) revokeShared(r *birdResult, scale time.Duration) {
	t := f.t
	aoctl := lab.MustBin(t, "aoctl")
	pid := f.aokeyd.Process.Pid
	c0, rs0, conf0 := mustCPU(t, pid), cpuOr(f.rs.pid), f.configures()
	type exit struct {
		out []byte
		err error
		at  time.Duration
	}
	exited := make(chan exit, 1)
	rv := time.Now()
	go func() {
		out, err := exec.Command(aoctl, "--socket", f.ctl.Socket(), "--json", "--timeout", "300s", "revoke", chainShared+"/k2").Output()
		exited <- exit{out, err, time.Since(rv)}
	}()
	done, _, perr := f.pollUntil(f.peers, rv, time.Minute+scale, "k2 revoked everywhere", clean(2), nil)
	e := <-exited
	r.RevokeAokeydCPUs = (mustCPU(t, pid) - c0).Seconds()
	r.RevokeRSBirdCPUs = (cpuOr(f.rs.pid) - rs0).Seconds()
	if e.err != nil {
		t.Fatalf("aoctl revoke %s/k2: %v: %s", chainShared, e.err, e.out)
	}
	if perr != nil {
		t.Fatal(perr)
	}
	r.RevokeMs, r.RevokeAoctlMs = ms(last(done)), ms(e.at)
	r.RevokeConfigures = f.configures() - conf0
	var res control.RevokeResult
	if err := json.Unmarshal(e.out, &res); err != nil {
		t.Fatalf("aoctl revoke --json: %v: %s", err, e.out)
	}
	r.RevokeActions = map[string]int{}
	errs := 0
	for _, s := range res.Sockets {
		r.RevokeActions[fmt.Sprint(s.Action)]++
		if s.Error != "" {
			if errs++; errs <= 3 {
				t.Errorf("revoke: socket %+v", s)
			}
		}
	}
	if errs > 3 {
		t.Errorf("revoke: %d sockets with an error in all", errs)
	}
	t.Logf("n=%d: aoctl revoke %s/k2: last socket seen clean at %.0f ms, aoctl exit at %.0f ms (daemon's elapsed %v), %.0f configures; CPU aokeyd %.2fs, route server BIRD %.2fs; actions %v",
		f.n, chainShared, r.RevokeMs, r.RevokeAoctlMs, time.Duration(res.Elapsed), r.RevokeConfigures, r.RevokeAokeydCPUs, r.RevokeRSBirdCPUs, r.RevokeActions)
	// kernel.expedite_rcu held the knob for each configure: put back.
	if b, err := os.ReadFile("/sys/kernel/rcu_expedited"); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("/sys/kernel/rcu_expedited after the revoke: %q (%v), want 0 put back", b, err)
	}
	for _, l := range strings.Split(lab.Tail(filepath.Join(f.dir, "aokeyd.log"), 4<<20), "\n") {
		if strings.Contains(l, "keys revoked through the executor") || strings.Contains(l, "BIRD lists applied for a revoke") {
			t.Logf("n=%d: aokeyd: %s", f.n, l)
		}
	}
}

// diagnoseBird keeps aokeyd's log with the results and, when the test
// failed, prints what aokeyd and both BIRDs say.
func (f *rsFleet) diagnoseBird(t *testing.T) {
	if !diagnoseAokeyd(t, f.dir, fmt.Sprintf("birdfleet-aokeyd-n%d.log", f.n)) {
		return
	}
	for name, b := range map[string]*birdFleet{"route server": f.rs, "members": f.members} {
		if b == nil {
			continue
		}
		t.Logf("%s BIRD: %s\nbird.log (tail):\n%s\nbird's output:\n%s", name, b.summary(), lab.Tail(filepath.Join(b.dir, "bird.log"), 4000),
			lab.Tail(filepath.Join(b.dir, "stdout.log"), 4000))
	}
	a, _ := tcpExt(f.a)
	b, _ := tcpExt(f.b)
	for _, c := range []string{"TCPAOGood", "TCPAOBad", "TCPAOKeyNotFound", "TCPAORequired", "TCPAODroppedIcmps"} {
		t.Logf("%s: route server %d, members %d", c, a[c], b[c])
	}
}
