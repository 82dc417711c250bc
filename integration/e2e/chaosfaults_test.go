package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/integration/chaos"
	"github.com/aokeyd/aokeyd/internal/control"
)

// chaosDriver injects the schedule's faults into the fleet and tells the
// checker each one's window.
type chaosDriver struct {
	f   *chaosFleet
	chk *chaos.Checker
	// injected and skipped count faults by kind (skipped: the target was
	// already down, or a revoke's precondition never held).
	injected, skipped map[chaos.Kind]int
	// Vault-wide faults in force (they overlap).
	down, sealed int
	slow         map[int]int // delay ms -> count
	denied       map[string]int
	failing      map[string]int
	linkDown     map[int]int
	// revokes waiting for their precondition.
	pending []pendingRevoke
	// starts are the aokeyds a fault killed that do not run again yet.
	starts   []pendingStart
	revokes  int // applied (local ones, the disk-full ones included)
	fleetRev int
	refused  int // local revokes refused (nothing revoked: its record could not be written)
	// clock is the guest clock's total step in force.
	clock time.Duration
	// outputs are what aoctl printed (scanned for key bytes).
	outputs [][]byte
	// maxLate is how late the schedule ran at worst.
	maxLate time.Duration
}

type pendingRevoke struct {
	kind     chaos.Kind
	router   string
	deadline time.Time
}

func newChaosDriver(f *chaosFleet, chk *chaos.Checker) *chaosDriver {
	return &chaosDriver{f: f, chk: chk, injected: map[chaos.Kind]int{}, skipped: map[chaos.Kind]int{}, slow: map[int]int{},
		denied: map[string]int{}, failing: map[string]int{}, linkDown: map[int]int{}}
}

// start injects fault x and returns what ends it (nil: nothing to end).
func (d *chaosDriver) start(x chaos.Fault) (end func()) {
	f, t := d.f, d.f.t
	desc := x.String()
	switch x.Kind {
	case chaos.KillAokeyd:
		r := f.rs[x.Router]
		if !r.aokeydRunning() {
			d.skipped[x.Kind]++
			return nil
		}
		over := d.chk.Fault(desc, false, "router:"+r.name)
		running := d.kill(r)
		d.injected[x.Kind]++
		return func() {
			if !running {
				over()
				return
			}
			// The fault lasts until aokeyd runs again: a start it
			// refuses while a key-source fault holds the chain
			// invalid is tried again (startAgain).
			d.startAgain(r, desc, over)
		}
	case chaos.KillLagging:
		return d.killLagging(x, desc)
	case chaos.RecordLost:
		return d.recordLost(x, desc)
	case chaos.KillSpeaker:
		r := f.rs[x.Router]
		pid := r.speakerPID()
		if pid == 0 {
			d.skipped[x.Kind]++
			return nil
		}
		over := d.chk.Fault(desc, true, "router:"+r.name)
		d.injected[x.Kind]++
		switch r.kind {
		case gobgpV3, gobgpV4:
			r.mu.Lock()
			g := r.gobgp
			r.gobgp = nil
			r.mu.Unlock()
			g.Kill()
			return func() {
				f.startGobgpd(r)
				over()
			}
		case frrBgpd:
			// watchfrr starts a new bgpd (through bgpd_wrap, under
			// `aokeyd exec`) on its own.
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid)
			return func() {
				r.fr.WaitUp(t)
				over()
			}
		default:
			r.mu.Lock()
			r.down = true
			r.mu.Unlock()
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid)
			return func() {
				if r.kind == birdPlain {
					restartBird(t, r)
				} else {
					f.startSpeaker(r)
				}
				over()
			}
		}
	case chaos.VaultDown:
		over := d.chk.Fault(desc, false, "")
		if d.down == 0 {
			f.v.Stop()
		}
		d.down++
		d.injected[x.Kind]++
		return func() {
			if d.down--; d.down == 0 {
				for f.v.Start() != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
			over()
		}
	case chaos.VaultSlow:
		over := d.chk.Fault(desc, false, "")
		d.slow[x.Arg]++
		d.setDelay()
		d.injected[x.Kind]++
		return func() {
			if d.slow[x.Arg]--; d.slow[x.Arg] == 0 {
				delete(d.slow, x.Arg)
			}
			d.setDelay()
			over()
		}
	case chaos.VaultSealed:
		over := d.chk.Fault(desc, false, "")
		f.v.Seal()
		d.sealed++
		d.injected[x.Kind]++
		return func() {
			if d.sealed--; d.sealed == 0 {
				f.v.Unseal()
			}
			over()
		}
	case chaos.Vault403, chaos.Vault500:
		over := d.chk.Fault(desc, false, "router:"+x.Router)
		prefixes := []string{"secret/data/aokeyd/" + x.Router + "/", "secret/metadata/aokeyd/" + x.Router + "/"}
		for _, p := range prefixes {
			if x.Kind == chaos.Vault403 {
				f.v.Deny(p)
			} else {
				d.failing[p]++
				f.v.Fail(p, 500)
			}
		}
		d.injected[x.Kind]++
		return func() {
			for _, p := range prefixes {
				if x.Kind == chaos.Vault403 {
					f.v.Undeny(p)
				} else if d.failing[p]--; d.failing[p] == 0 {
					f.v.Fail(p, 0)
				}
			}
			over()
		}
	case chaos.KeyInvalid, chaos.ChainEmptied, chaos.ChainRenamed:
		r := f.rs[x.Router]
		f.mu.Lock()
		busy := f.edited[r.name] != ""
		if !busy {
			f.edited[r.name] = x.Kind
		}
		keys := f.sourceKeys()
		f.mu.Unlock()
		if busy {
			d.skipped[x.Kind]++
			return nil
		}
		over := d.chk.Fault(desc, false, "router:"+r.name)
		if err := f.writeCore(r, keys, x.Kind); err != nil {
			d.chk.Event("%s: not written (%v)", desc, err)
		}
		d.injected[x.Kind]++
		return func() {
			if x.Kind == chaos.ChainRenamed {
				if err := f.unrename(r); err != nil {
					d.chk.Event("%s: the renamed chain not removed (%v)", desc, err)
				}
			}
			f.mu.Lock()
			delete(f.edited, r.name)
			f.pending[r.name] = true
			f.mu.Unlock()
			over()
		}
	case chaos.Revoke, chaos.FleetRevoke:
		d.pending = append(d.pending, pendingRevoke{kind: x.Kind, router: x.Router, deadline: time.Now().Add(45 * time.Second)})
		return nil
	case chaos.DiskFull:
		r := f.rs[x.Router]
		filler := filepath.Join(r.dir, "state", "chaos-filler")
		if _, err := os.Stat(filler); err == nil {
			d.skipped[x.Kind]++
			return nil
		}
		over := d.chk.Fault(desc, false, "router:"+r.name)
		fill(filler)
		d.injected[x.Kind]++
		d.pending = append(d.pending, pendingRevoke{kind: x.Kind, router: r.name, deadline: time.Now().Add(x.Dur)})
		return func() {
			_ = os.Remove(filler)
			over()
		}
	case chaos.ClockStep:
		over := d.chk.Fault(desc, false, "")
		step := time.Duration(x.Arg) * time.Millisecond
		stepClock(t, step)
		d.clock += step
		d.injected[x.Kind]++
		return func() {
			stepClock(t, -step)
			d.clock -= step
			over()
		}
	case chaos.Netem:
		l := f.link(x.Link)
		over := d.chk.Fault(desc, false, strconv.Itoa(l.n))
		for _, end := range []string{l.a, l.b} {
			_, _ = f.rs[end].ns.Run("tc", "qdisc", "replace", "dev", f.ifname(l, end), "root", "netem",
				"loss", fmt.Sprintf("%d%%", x.Arg), "delay", "30ms", "20ms", "reorder", "25%", "50%")
		}
		d.injected[x.Kind]++
		return func() {
			for _, end := range []string{l.a, l.b} {
				_, _ = f.rs[end].ns.Run("tc", "qdisc", "del", "dev", f.ifname(l, end), "root")
			}
			over()
		}
	case chaos.LinkDown:
		l := f.link(x.Link)
		over := d.chk.Fault(desc, true, strconv.Itoa(l.n))
		if d.linkDown[l.n] == 0 {
			f.rs[l.a].ns.MustRun(t, "ip", "link", "set", f.ifname(l, l.a), "down")
		}
		d.linkDown[l.n]++
		d.injected[x.Kind]++
		return func() {
			if d.linkDown[l.n]--; d.linkDown[l.n] == 0 {
				f.rs[l.a].ns.MustRun(t, "ip", "link", "set", f.ifname(l, l.a), "up")
			}
			over()
		}
	}
	t.Fatalf("fault kind %q not handled", x.Kind)
	return nil
}

func (d *chaosDriver) setDelay() {
	worst := 0
	for ms := range d.slow {
		worst = max(worst, ms)
	}
	d.f.v.Delay("", time.Duration(worst)*time.Millisecond)
}

// tryRevokes makes the pending revokes whose precondition holds: the
// fleet's newest key is on every socket of every aokeyd router's ring
// sessions and listeners, and every aokeyd and speaker is up, so that
// revoking the previous key strands nothing that a correct aokeyd keeps.
// The revoke then races the roll from the previous key to the newest.
func (d *chaosDriver) tryRevokes() {
	f := d.f
	if len(d.pending) == 0 {
		return
	}
	target, ok := f.revokeTarget()
	keep := d.pending[:0]
	for _, p := range d.pending {
		if !ok || f.revokedAt(p, target) {
			if time.Now().After(p.deadline) {
				d.skipped[p.kind]++
				d.chk.Event("%s at %s: skipped (the fleet never settled on its newest key in time)", p.kind, p.router)
			} else {
				keep = append(keep, p)
			}
			continue
		}
		if d.revoke(p, target) {
			if time.Now().Before(p.deadline) {
				keep = append(keep, p)
			} else {
				d.skipped[p.kind]++
			}
		}
	}
	d.pending = keep
}

// revoke makes p's revoke of target; again: it failed in a way an
// operator retries (Vault failing, aokeyd down), and stays pending until
// its deadline. (It used to append to d.pending while tryRevokes rebuilt
// it, so a retry was dropped, neither made nor counted skipped.)
func (d *chaosDriver) revoke(p pendingRevoke, target string) (again bool) {
	f := d.f
	switch p.kind {
	case chaos.FleetRevoke:
		out, err := f.aoctl("fleet", "revoke", "core/"+target, "--reason", "chaos", "--wait", "0", "--json")
		d.outputs = append(d.outputs, out)
		if err != nil {
			// Vault failing: try again later, as an operator would.
			d.chk.Event("fleet revoke core/%s: %v (again later)", target, err)
			return true
		}
		now := time.Now()
		f.mu.Lock()
		for _, n := range f.aokeydRouters() {
			f.revoked[n][target] = true
		}
		f.mu.Unlock()
		d.chk.Revoked(target, nil, now)
		d.fleetRev++
		d.injected[p.kind]++
	default:
		r := f.rs[p.router]
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := r.ctl.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: target})
		cancel()
		now := time.Now()
		if err != nil {
			if p.kind == chaos.DiskFull {
				// Refused because its record could not be written:
				// nothing was revoked, and it must say so.
				d.refused++
				d.chk.Event("revoke core/%s at %s refused: %v", target, p.router, err)
				return false
			}
			d.chk.Event("revoke core/%s at %s: %v (again later)", target, p.router, err)
			return true
		}
		f.mu.Lock()
		f.revoked[p.router][target] = true
		f.mu.Unlock()
		d.chk.Revoked(target, []string{p.router}, now)
		d.chk.Event("revoke core/%s at %s: %d sockets, record error %q", target, p.router, len(res.Sockets), res.RecordError)
		d.revokes++
		if p.kind == chaos.Revoke {
			d.injected[p.kind]++
		}
	}
	return false
}

// waitGone waits (up to 5s) until pid no longer exists.
func waitGone(pid int) {
	for range 50 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fill writes path until its file system is full.
func fill(path string) {
	fh, err := os.Create(path)
	if err != nil {
		return
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			return
		}
	}
}

// stepClock steps the guest's wall clock by step (the monotonic clock,
// which the checker and BGP's timers run on, does not move).
func stepClock(t interface{ Fatalf(string, ...any) }, step time.Duration) {
	tv := syscall.NsecToTimeval(time.Now().Add(step).UnixNano())
	if err := syscall.Settimeofday(&tv); err != nil {
		t.Fatalf("settimeofday: %v", err)
	}
}
