package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/integration/chaos"
	"github.com/aokeyd/aokeyd/internal/control"
)

// The chaos run's restart faults (issue 47): what keeps a session alive
// must survive aokeyd's restarts and its lost records. The checker's
// invariants (no session dropped unexplained, none stranded, no revoked
// key left) hold through them as through every other fault.

// killLagging makes the peers of router r lag on a key r's source drops:
// r's chain holds only a key no other router has, so r's aokeyd rolls its
// sessions towards it and the peers stay on the fleet's key, which r keeps
// only because they carry it (never strand). r's aokeyd is SIGKILLed while
// a roll waits for a peer (or after a bounded wait), and started again at
// once, the source still dropping the key the peers use; its chain is
// restored at the fault's end.
func (d *chaosDriver) killLagging(x chaos.Fault, desc string) (end func()) {
	f := d.f
	r := f.rs[x.Router]
	f.mu.Lock()
	busy := f.edited[r.name] != ""
	if !busy {
		f.edited[r.name] = x.Kind
	}
	// 50 ID slots ahead of the newest key: no router holds its IDs.
	lone := chaosKey{seq: f.keys[len(f.keys)-1].seq + 50, created: time.Now()}
	f.secrets = append(f.secrets, f.secret(lone.seq)) // searched for in the logs too
	f.mu.Unlock()
	if busy {
		d.skipped[x.Kind]++
		return nil
	}
	over := d.chk.Fault(desc, false, "router:"+r.name)
	if err := f.writeCore(r, []chaosKey{lone}, x.Kind); err != nil {
		d.chk.Event("%s: the lone key not written (%v)", desc, err)
	}
	lagging := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !lagging; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := r.ctl.Status(ctx, "")
		cancel()
		for _, p := range st.Peers {
			lagging = lagging || err == nil && p.Rotation.State == "announced"
		}
		if !lagging {
			time.Sleep(250 * time.Millisecond)
		}
	}
	d.chk.Event("%s: a peer lagging on the dropped key when killed: %t", desc, lagging)
	if d.kill(r) {
		d.startAgain(r, desc, nil) // the lone key is valid: at once
	} else {
		d.chk.Event("%s: aokeyd was not running", desc)
	}
	d.injected[x.Kind]++
	return func() {
		f.mu.Lock()
		delete(f.edited, r.name)
		f.pending[r.name] = true
		f.mu.Unlock()
		over()
	}
}

// recordLost SIGKILLs router r's aokeyd and deletes one of its state
// records with its backup (a purge, a restore of an old backup), then
// starts it again at the fault's end. Without its ownership record a
// start claims only the keys it desires exactly in place: its older keys
// (a key a roll was retiring, one the source dropped meanwhile) are
// foreign then, kept and warned of, never deleted. The fault's end plays
// the operator status asks for: `aoctl adopt PEER` for each of r's peers
// hands them back, and aokeyd retires what no session carries.
func (d *chaosDriver) recordLost(x chaos.Fault, desc string) (end func()) {
	r := d.f.rs[x.Router]
	if !r.aokeydRunning() {
		d.skipped[x.Kind]++
		return nil
	}
	over := d.chk.Fault(desc, false, "router:"+r.name)
	running := d.kill(r)
	name := []string{"carried-keys.json", "owned-keys.json", "migrations.json"}[x.Arg%3]
	for _, p := range []string{name, name + ".bak"} {
		if err := os.Remove(filepath.Join(r.dir, "state", p)); err != nil && !os.IsNotExist(err) {
			d.chk.Event("%s: %s not deleted (%v)", desc, p, err)
		}
	}
	d.chk.Event("%s: %s and its backup deleted while aokeyd is down", desc, name)
	d.injected[x.Kind]++
	return func() {
		if !running {
			over()
			return
		}
		d.startAgain(r, desc, func() {
			if name == "owned-keys.json" {
				d.adoptAll(r, desc)
			}
			over()
		})
	}
}

// adoptAll runs an adopt of each of r's peers, as its operator would once
// status shows its keys foreign after a lost ownership record.
func (d *chaosDriver) adoptAll(r *chaosRouter, desc string) {
	core, edge := d.f.corePeers(r)
	n := 0
	for _, p := range append(core, edge...) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := r.ctl.Adopt(ctx, control.AdoptRequest{Peer: p})
		cancel()
		if err != nil {
			d.chk.Event("%s: adopt %s: %v", desc, p, err)
			continue
		}
		n += len(res.Adopted)
	}
	d.chk.Event("%s: adopted %d keys left foreign by the lost ownership record", desc, n)
}

// aokeydRunning reports whether r's aokeyd runs (not killed by a fault).
func (r *chaosRouter) aokeydRunning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aokeyd != nil
}

// kill SIGKILLs r's aokeyd; false when it was not running.
func (d *chaosDriver) kill(r *chaosRouter) bool {
	r.mu.Lock()
	cmd := r.aokeyd
	r.aokeyd = nil
	r.mu.Unlock()
	if cmd == nil {
		return false
	}
	_ = cmd.Process.Kill()
	_, _ = cmd.Process.Wait()
	return true
}

// pendingStart is a router whose aokeyd a fault killed and that does not
// run again yet; then runs once it does.
type pendingStart struct {
	r    *chaosRouter
	desc string
	then func()
}

// startAgain starts r's aokeyd again, at once or at a later tryStarts:
// aokeyd refuses to start on a key source that holds what aoctl validate
// refuses (issue 47 item 5), as a key-source fault's edit (a key made
// invalid, the chain emptied or renamed) does until it ends and the good
// chain is written back. The router's operator (or systemd's
// Restart=on-failure) starts it once the keys are good; so does the run,
// trying each second. then runs once aokeyd runs.
func (d *chaosDriver) startAgain(r *chaosRouter, desc string, then func()) {
	d.starts = append(d.starts, pendingStart{r: r, desc: desc, then: then})
	d.tryStarts()
}

// tryStarts starts the pending aokeyds, but not on a chain a key-source
// fault holds invalid; a start aokeyd refuses stays pending, and an event
// says why.
func (d *chaosDriver) tryStarts() {
	todo := d.starts
	d.starts = nil
	for _, p := range todo {
		if d.f.sourceInvalid(p.r) {
			d.starts = append(d.starts, p)
			continue
		}
		if err := d.f.tryStartAokeyd(p.r); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			d.chk.Event("%s: aokeyd's start refused, tried again in a second: %s", p.desc, first)
			d.starts = append(d.starts, p)
			continue
		}
		if p.then != nil {
			p.then()
		}
	}
}
