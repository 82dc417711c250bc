package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/chaos"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// chaosBound is how long a session may take to come back after the last
// fault holding it down ended (a restarted gobgpd reads its config,
// connects after its 1s connect-retry, and the emulated CPUs are slow);
// chaosRevokeBound is the fleet's revoke promise under chaos: one refresh
// plus 2s.
const (
	chaosBound       = 60 * time.Second
	chaosRevokeBound = fleetRefresh + 2*time.Second
)

// TestChaos runs the chaos fleet for AOKEYD_CHAOS (make test: 1m;
// make chaos: 60m) under the fault schedule drawn from AOKEYD_CHAOS_SEED
// (default: the clock; 1 in make test), checking the invariants
// throughout, and prints one line:
//
//	chaos: minutes=M routers=R rotations=N faults=F flaps_unexplained=0 stranded=0 revoked_left=0 seed=S
//
// A failure prints the seed: make chaos CHAOS_SEED=S replays its schedule.
func TestChaos(t *testing.T) {
	kerneltest.Require(t)
	// Not parallel: flaps are judged against the fault windows, and a
	// neighbor scenario's CPU would stretch every recovery.
	d := time.Minute
	if v := os.Getenv("AOKEYD_CHAOS"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("AOKEYD_CHAOS=%q: %v", v, err)
		}
	}
	// make chaos draws a new schedule each run; make test's short run
	// (AOKEYD_CHAOS unset) a fixed one, as its differential test does.
	seed := uint64(time.Now().UnixNano())
	if os.Getenv("AOKEYD_CHAOS") == "" {
		seed = 1
	}
	if v := os.Getenv("AOKEYD_CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("AOKEYD_CHAOS_SEED=%q: %v", v, err)
		}
	}
	t.Logf("chaos seed %d (replay: make chaos CHAOS=%s CHAOS_SEED=%d)", seed, d, seed)
	f := newChaosFleet(t, seed)
	lab.Eventually(t, 180*time.Second, "every chaos link established", func() (bool, string) {
		var down []string
		for _, l := range f.links {
			if !f.rs[l.a].session(f.rs[l.b].addrs[slices.Index(f.rs[l.b].links, l.n)]).Up {
				down = append(down, strconv.Itoa(l.n))
			}
		}
		return len(down) == 0, "down: " + strings.Join(down, ",")
	})
	params := chaos.Params{}
	if d < 10*time.Minute {
		// A short run (make test) still sees a dozen faults.
		params.MeanGap, params.Quiet = 5*time.Second, 30*time.Second
	}
	if d < 2*time.Minute {
		// make test's minute: faults over its first 40 s, and a few
		// rotations among them.
		params.MeanGap, params.Quiet = 4*time.Second, 20*time.Second
		params.RotationMin, params.RotationMax = 6*time.Second, 15*time.Second
	}
	if d < 10*time.Minute && os.Getenv("AOKEYD_CHAOS_KINDS") == "" {
		// make test's short run leaves the guest's clock alone: other
		// scenarios run beside it and read key lifetimes against it.
		for _, k := range chaos.Kinds {
			if k != chaos.ClockStep {
				params.Kinds = append(params.Kinds, k)
			}
		}
	}
	if v := os.Getenv("AOKEYD_CHAOS_KINDS"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(chaos.Kinds, chaos.Kind(k)) {
				t.Fatalf("AOKEYD_CHAOS_KINDS: unknown kind %q (kinds: %v)", k, chaos.Kinds)
			}
			params.Kinds = append(params.Kinds, chaos.Kind(k))
		}
	}
	var topo chaos.Topology
	for _, n := range f.aokeydRouters() {
		if n != chaosWitness {
			topo.Aokeyd = append(topo.Aokeyd, n)
		}
	}
	topo.Speakers = f.names
	for _, l := range f.links {
		topo.Links = append(topo.Links, l.n)
	}
	sched := chaos.Plan(seed, d, topo, params)
	t.Logf("schedule:\n%s", sched)

	start := time.Now()
	chk := chaos.NewChecker(start, chaosBound, chaosRevokeBound)
	evlog, err := os.Create(filepath.Join(t.TempDir(), "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer evlog.Close()
	chk.Log = evlog
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "the run's events (last 200)", lab.Tail(evlog.Name(), 200*100))
		}
	})
	drv := newChaosDriver(f, chk)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.sample(chk, stop) }()
	leak := &leakSamples{}
	go func() { defer wg.Done(); leak.run(f.rs[chaosWitness].metrics, start, d, stop) }()

	rotations := f.drive(drv, sched, start)

	// The quiet tail: every fault over. Sessions must be back, every
	// socket must hold what the source says, every fleet document agree.
	f.final(chk, drv)
	close(stop)
	wg.Wait()
	leak.check(chk)
	f.scanLogs(chk, drv)

	rep := chk.Report()
	var kinds []string
	for _, k := range chaos.Kinds {
		kinds = append(kinds, fmt.Sprintf("%s=%d/%d", k, drv.injected[k], drv.skipped[k]))
	}
	t.Logf("faults injected/skipped by kind: %s", strings.Join(kinds, " "))
	t.Logf("rotations %d, revokes %d (refused on a full disk %d), fleet revokes %d, flaps the faults caused %d, links %d",
		rotations, drv.revokes, drv.refused, drv.fleetRev, rep.Flaps, rep.Links)
	t.Logf("aokeyd %s (witness): %s", chaosWitness, leak.summary())
	t.Logf("the schedule ran up to %s late (restarts, Vault writes and revokes are made in line)", drv.maxLate.Round(time.Millisecond))
	faults := 0
	for _, n := range drv.injected {
		faults += n
	}
	fmt.Printf("chaos: minutes=%d routers=%d rotations=%d faults=%d flaps_unexplained=%d stranded=%d revoked_left=%d seed=%d\n",
		int(d.Round(time.Minute)/time.Minute), len(f.names), rotations, faults, rep.ByInvariant[chaos.UnexplainedFlap],
		rep.ByInvariant[chaos.Stranded], rep.ByInvariant[chaos.RevokedLeft], seed)
	for _, v := range rep.Violations {
		t.Errorf("seed %d: %s", seed, v)
	}
}

// chaosWitness is the aokeyd never killed: its RSS and goroutines are
// compared between the run's first and last quarters.
const chaosWitness = "g3"

// drive runs the schedule: each fault started at its offset and ended
// after its duration, a rotation at each of the schedule's; between them,
// pending chain writes retried and pending revokes tried. It returns the
// number of rotations.
func (f *chaosFleet) drive(drv *chaosDriver, s chaos.Schedule, start time.Time) int {
	type action struct {
		at time.Duration
		do func()
	}
	var acts []action
	for _, x := range s.Faults {
		var end func()
		acts = append(acts, action{x.At, func() { end = drv.start(x) }})
		acts = append(acts, action{x.At + x.Dur, func() {
			if end != nil {
				end()
			}
		}})
	}
	rotations := 0
	for _, at := range s.Rotations {
		acts = append(acts, action{at, func() { f.rotate(drv.chk); rotations++ }})
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	// The chains are written by a goroutine of their own: a slow Vault
	// must not hold the schedule up.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f.flush(drv.chk)
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for _, a := range acts {
		for {
			wait := time.Until(start.Add(a.at))
			drv.tryStarts()
			drv.tryRevokes()
			if wait <= 0 {
				break
			}
			time.Sleep(min(wait, time.Second))
		}
		if late := -time.Until(start.Add(a.at)); late > drv.maxLate {
			drv.maxLate = late
		}
		a.do()
	}
	for time.Since(start) < s.Duration {
		drv.tryStarts()
		drv.tryRevokes()
		time.Sleep(time.Second)
	}
	for _, p := range drv.pending {
		drv.skipped[p.kind]++
	}
	drv.pending = nil
	return rotations
}

// rotate adds the fleet's next key to chain core: sendable at once, the
// source keeping the last three; every router's write is pending until
// Vault takes it.
func (f *chaosFleet) rotate(chk *chaos.Checker) {
	f.mu.Lock()
	k := chaosKey{seq: f.keys[len(f.keys)-1].seq + 1, created: time.Now()}
	f.keys = append(f.keys, k)
	f.secrets = append(f.secrets, f.secret(k.seq))
	for _, n := range f.aokeydRouters() {
		f.pending[n] = true
	}
	f.mu.Unlock()
	chk.Event("rotation to core/%s", k.name())
}

// sourceKeys are the keys chain core holds (f.mu held).
func (f *chaosFleet) sourceKeys() []chaosKey {
	return slices.Clone(f.keys[max(0, len(f.keys)-3):])
}

// flush writes the pending chains (not those a key-source fault holds
// edited), in parallel; what Vault refuses stays pending.
func (f *chaosFleet) flush(chk *chaos.Checker) {
	f.mu.Lock()
	var todo []string
	for n := range f.pending {
		if f.edited[n] == "" {
			todo = append(todo, n)
		}
	}
	keys := f.sourceKeys()
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.writeCore(f.rs[n], keys, ""); err != nil {
				return
			}
			chk.Event("chain core of %s written, newest %s", n, keys[len(keys)-1].name())
			f.mu.Lock()
			if f.edited[n] == "" && f.keys[len(f.keys)-1] == keys[len(keys)-1] {
				delete(f.pending, n)
			}
			f.mu.Unlock()
		}()
	}
	wg.Wait()
}

// revokeTarget is the key a revoke takes now, the fleet's previous one,
// once the precondition holds: every aokeyd and speaker up, no chain
// write pending or edited, and the newest key on every socket of every
// aokeyd router's ring sessions and listener.
func (f *chaosFleet) revokeTarget() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keys) < 2 || len(f.pending) > 0 || len(f.edited) > 0 {
		return "", false
	}
	newest, prev := f.keys[len(f.keys)-1].name(), f.keys[len(f.keys)-2].name()
	for _, n := range f.names {
		r := f.rs[n]
		if r.kind == birdPlain {
			continue
		}
		r.mu.Lock()
		up := r.aokeyd != nil
		r.mu.Unlock()
		if !up || r.speakerPID() == 0 {
			return "", false
		}
		seen := f.seen[n]
		core, _ := f.corePeers(r)
		if len(seen) < len(core)+1 {
			return "", false
		}
		for where, ks := range seen {
			if (where == "listener" || slices.Contains(core, strings.TrimPrefix(where, "session "))) && !slices.Contains(ks, newest) {
				return "", false
			}
		}
	}
	return prev, true
}

// revokedAt reports whether p's revoke of key would change nothing (key
// already revoked where p revokes it).
func (f *chaosFleet) revokedAt(p pendingRevoke, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.kind == chaos.FleetRevoke {
		for _, n := range f.aokeydRouters() {
			if !f.revoked[n][key] {
				return false
			}
		}
		return true
	}
	return f.revoked[p.router][key]
}

// sample feeds the checker every second until stop: each link's session
// from its gobgpd end, and the keys of every aokeyd router's listener and
// sessions, read from the kernel.
func (f *chaosFleet) sample(chk *chaos.Checker, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, l := range f.links {
			a, b := f.rs[l.a], f.rs[l.b]
			s := a.session(b.addrs[slices.Index(b.links, l.n)])
			chk.Observe(strconv.Itoa(l.n), []string{l.a, l.b}, time.Now(), s)
		}
		for _, n := range f.aokeydRouters() {
			seen := f.socketKeys(f.rs[n])
			at := time.Now()
			for where, ks := range seen {
				chk.Keys(n, where, at, ks)
			}
			f.mu.Lock()
			f.seen[n] = seen
			f.mu.Unlock()
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// socketKeys reads r's gobgpd's listener and sessions from the kernel:
// where ("listener", "session PEER") to the names of the keys there.
func (f *chaosFleet) socketKeys(r *chaosRouter) map[string][]string {
	pid := r.speakerPID()
	out := map[string][]string{}
	if pid == 0 {
		return out
	}
	read := func(where string, refs []sockets.Ref) {
		for _, ref := range refs {
			_ = sockets.System{}.With(ref, func(fd int) error {
				ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
				if err != nil {
					return err
				}
				var names []string
				for _, k := range ks {
					names = append(names, f.keyName(r, k.SendID, k.RecvID))
				}
				names = append(names, out[where]...)
				slices.Sort(names)
				out[where] = slices.Compact(names)
				return nil
			})
		}
	}
	r.rebind.RLock()
	lis, _ := sockets.System{}.Listeners(pid, 179)
	read("listener", lis)
	r.rebind.RUnlock()
	for _, p := range r.peers {
		conns, _ := sockets.System{}.Connections(pid, p)
		var est []sockets.Ref
		for _, c := range conns {
			if c.Remote.Port() == 179 || c.Local.Port() == 179 {
				est = append(est, c)
			}
		}
		if len(est) > 0 {
			read("session "+p.String(), est)
		}
	}
	return out
}

// keyName names the key with IDs send/recv at r.
func (f *chaosFleet) keyName(r *chaosRouter, send, recv uint8) string {
	ids := [2]uint8{send, recv}
	if !r.odd {
		ids = [2]uint8{recv, send}
	}
	if ids == edgeIDs {
		return "e1"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.keys) - 1; i >= 0; i-- {
		if f.keys[i].ids() == ids {
			return f.keys[i].name()
		}
	}
	return fmt.Sprintf("ids%d/%d", send, recv)
}

// final checks the quiet tail: every session back; every socket of every
// aokeyd router holding the desired keys; every fleet document agreeing;
// then a fresh reconnect from every far end.
func (f *chaosFleet) final(chk *chaos.Checker, drv *chaosDriver) {
	t := f.t
	// The operator's automation makes sure every chain holds what it
	// last wrote (a write it gave up on may have landed or not).
	f.mu.Lock()
	for _, n := range f.aokeydRouters() {
		f.pending[n] = true
	}
	f.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		f.flush(chk)
		f.mu.Lock()
		left := len(f.pending)
		f.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the chains could not be written in 30s after the run: %v", f.pending)
			break
		}
	}
	// Every chain good again: every aokeyd a fault killed runs.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		drv.tryStarts()
		if len(drv.starts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range drv.starts {
				t.Errorf("%s: aokeyd could not be started again in 30s after the run", p.desc)
			}
			break
		}
	}
	if err := lab.Within(chaosBound, "every chaos link back", func() (bool, string) {
		down := chk.Down()
		return len(down) == 0, "down: " + strings.Join(down, ",")
	}); err != nil {
		chk.Violate(chaos.Stranded, fmt.Sprintf("after the quiet period: %v", err))
	}
	var last string
	if err := lab.Within(chaosBound, "every socket holding the desired keys", func() (bool, string) {
		var bad []string
		for _, n := range f.aokeydRouters() {
			r := f.rs[n]
			f.mu.Lock()
			seen := f.seen[n]
			f.mu.Unlock()
			core, edge := f.corePeers(r)
			want := map[string][]string{"listener": f.desired(n, true)}
			if len(edge) > 0 {
				want["listener"] = append(want["listener"], f.desired(n, false)...)
				slices.Sort(want["listener"])
			}
			for _, p := range r.peers {
				want["session "+p.String()] = f.desired(n, slices.Contains(core, p.String()))
			}
			for where, w := range want {
				if !slices.Equal(seen[where], w) {
					bad = append(bad, fmt.Sprintf("%s %s: %v, want %v", n, where, seen[where], w))
				}
			}
		}
		last = strings.Join(bad, "; ")
		return len(bad) == 0, last
	}); err != nil {
		chk.Violate(chaos.Disagreement, last)
		for _, n := range f.aokeydRouters() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st, err := f.rs[n].ctl.Status(ctx, "")
			cancel()
			t.Logf("%s: key source %+v (%v)", n, st.KeySource, err)
		}
		f.mu.Lock()
		t.Logf("chain writes pending: %v", f.pending)
		f.mu.Unlock()
	}
	f.mu.Lock()
	newest := "core/" + f.keys[len(f.keys)-1].name()
	f.mu.Unlock()
	if err := lab.Within(chaosBound, "every fleet document agreeing", func() (bool, string) {
		out, err := f.aoctl("fleet", "status", "--json")
		var rep struct{ Links []fleet.Link }
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			return false, fmt.Sprintf("aoctl fleet status: %v (%v)", jerr, err)
		}
		var bad []string
		if len(rep.Links) != len(f.links) {
			bad = append(bad, fmt.Sprintf("%d links, want %d", len(rep.Links), len(f.links)))
		}
		for _, l := range rep.Links {
			for _, fl := range l.Flags {
				if fl.Kind != fleet.FarEndNotReporting || l.B != nil {
					bad = append(bad, l.Name()+": "+fl.Kind.String())
				}
			}
			ends := []fleet.End{l.A}
			want := "edge/e1"
			if l.B != nil {
				ends, want = append(ends, *l.B), newest
			}
			for _, e := range ends {
				if e.Peer.Session != "established" || e.Peer.Current != want {
					bad = append(bad, fmt.Sprintf("%s at %s: %s, current %q, want %q", l.Name(), e.Router, e.Peer.Session, e.Peer.Current, want))
				}
			}
		}
		last = strings.Join(bad, "; ")
		return len(bad) == 0, last
	}); err != nil {
		chk.Violate(chaos.Disagreement, "fleet documents: "+last)
	}
	// A fresh reconnect from every far end: each link's b end resets its
	// session (BIRD restarts its protocol); the listeners' keys must take
	// the new connection.
	over := chk.Fault("final reconnect from every far end", true, "")
	for _, l := range f.links {
		b, a := f.rs[l.b], f.rs[l.a]
		switch b.kind {
		case birdPlain, birdNative:
			b.restartBIRDProtocol(t)
			continue
		case frrBgpd:
			if _, err := b.fr.Vtysh("clear bgp " + a.addrs[slices.Index(a.links, l.n)].String()); err != nil {
				t.Errorf("clear bgp at %s: %v", b.name, err)
			}
			continue
		}
		sp, _ := b.speaker()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := sp.ResetPeer(ctx, peer.KeyOf(a.addrs[slices.Index(a.links, l.n)], ""), "chaos: fresh reconnect"); err != nil {
			t.Errorf("reset %s's session with %s: %v", b.name, a.name, err)
		}
		cancel()
	}
	over()
	time.Sleep(3 * time.Second)
	if err := lab.Within(chaosBound, "every link back after the far ends' reconnects", func() (bool, string) {
		down := chk.Down()
		return len(down) == 0, "down: " + strings.Join(down, ",")
	}); err != nil {
		chk.Violate(chaos.Stranded, fmt.Sprintf("a fresh reconnect from the far end failed: %v", err))
		for _, l := range chk.Down() {
			n, _ := strconv.Atoi(l)
			t.Logf("link %s, down after the far end's reconnect:\n%s", l, f.dumpLink(n))
		}
	}
	_ = drv
}

// scanLogs looks for every key secret the run made, in hex and base64,
// in every aokeyd log and everything aoctl printed.
func (f *chaosFleet) scanLogs(chk *chaos.Checker, drv *chaosDriver) {
	f.mu.Lock()
	secrets := slices.Clone(f.secrets)
	f.mu.Unlock()
	var files []string
	for _, n := range f.aokeydRouters() {
		m, _ := filepath.Glob(filepath.Join(f.rs[n].dir, "aokeyd.log*"))
		files = append(files, m...)
	}
	blobs := map[string][]byte{}
	for _, p := range files {
		b, _ := os.ReadFile(p)
		blobs[p] = b
	}
	for i, o := range drv.outputs {
		blobs[fmt.Sprintf("aoctl output %d", i)] = o
	}
	for name, b := range blobs {
		for _, s := range secrets {
			for _, enc := range []string{hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s)), base64.StdEncoding.EncodeToString(s)} {
				if bytes.Contains(b, []byte(enc)) {
					chk.Violate(chaos.KeyInLog, fmt.Sprintf("a key's bytes in %s", name))
				}
			}
		}
	}
}

// restartBird starts plain BIRD router r again (after a kill) with its
// configuration.
func restartBird(t *testing.T, r *chaosRouter) {
	_ = os.Remove(filepath.Join(r.dir, "bird.ctl"))
	br := bird.StartIn(t, r.ns, r.dir, r.birdCfg)
	r.mu.Lock()
	r.br, r.down = br, false
	r.mu.Unlock()
}

// leakSamples are the witness aokeyd's RSS and goroutines over the run.
type leakSamples struct {
	mu        sync.Mutex
	first     [][2]float64 // first quarter: rss, goroutines
	last      [][2]float64
	lastError error
}

func (l *leakSamples) run(addr string, start time.Time, d time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		rss, gr, err := scrapeProcess(addr)
		l.mu.Lock()
		switch el := time.Since(start); {
		case err != nil:
			l.lastError = err
		case el < d/4:
			l.first = append(l.first, [2]float64{rss, gr})
		case el > d*3/4:
			l.last = append(l.last, [2]float64{rss, gr})
		}
		l.mu.Unlock()
	}
}

func scrapeProcess(addr string) (rss, goroutines float64, err error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := 0
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			rss, _ = strconv.ParseFloat(v, 64)
			found++
		case "go_goroutines":
			goroutines, _ = strconv.ParseFloat(v, 64)
			found++
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("metrics at %s without process_resident_memory_bytes and go_goroutines", addr)
	}
	return rss, goroutines, sc.Err()
}

func mean(xs [][2]float64, i int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x[i]
	}
	return s / float64(len(xs))
}

func (l *leakSamples) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("RSS %.1f MiB -> %.1f MiB, goroutines %.0f -> %.0f (first vs last quarter, %d and %d samples; last scrape error %v)",
		mean(l.first, 0)/(1<<20), mean(l.last, 0)/(1<<20), mean(l.first, 1), mean(l.last, 1), len(l.first), len(l.last), l.lastError)
}

// check: the last quarter's means within 25% (plus 4 MiB of RSS and 10
// goroutines of slack: a short run's quarters are a few samples) of the
// first's.
func (l *leakSamples) check(chk *chaos.Checker) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.first) == 0 || len(l.last) == 0 {
		chk.Violate(chaos.Leak, fmt.Sprintf("no samples of the witness aokeyd in a quarter (%d, %d; %v)", len(l.first), len(l.last), l.lastError))
		return
	}
	if r0, r1 := mean(l.first, 0), mean(l.last, 0); r1 > r0*1.25+4<<20 {
		chk.Violate(chaos.Leak, fmt.Sprintf("RSS %.1f MiB in the first quarter, %.1f MiB in the last", r0/(1<<20), r1/(1<<20)))
	}
	if g0, g1 := mean(l.first, 1), mean(l.last, 1); g1 > g0*1.25+10 {
		chk.Violate(chaos.Leak, fmt.Sprintf("%.0f goroutines in the first quarter, %.0f in the last", g0, g1))
	}
}

// restartBIRDProtocol restarts b's BIRD protocol peer_a (its far end's
// fresh reconnect) with no read of its listener in flight until BIRD has
// bound its new one (rebind).
func (b *chaosRouter) restartBIRDProtocol(t *testing.T) {
	b.rebind.Lock()
	defer b.rebind.Unlock()
	if _, err := b.br.Birdc("restart", "peer_a"); err != nil {
		t.Errorf("birdc restart peer_a at %s: %v", b.name, err)
		return
	}
	if err := lab.Within(10*time.Second, "BIRD's new listener at "+b.name, func() (bool, string) {
		lis, err := sockets.System{}.Listeners(b.speakerPID(), 179)
		return err == nil && len(lis) > 0, fmt.Sprint(err)
	}); err != nil {
		t.Logf("%v (reads of its listener resume)", err)
	}
}
