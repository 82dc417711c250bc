package daemon

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// execPoll is how often the pass reads an executor's peers that are in
// flight (execActive) when nothing asks for a pass sooner: the retire
// proof needs a read of each such session about every second (execSettle
// counts from reads).
const execPoll = time.Second

// execSweep is how often the pass reads every executor peer when none of
// its inputs changed and no policy time boundary came: a peer whose list
// is the desired one and keeps no key has nothing a read could change
// (its session's reads are for status and the metrics, which are this
// old at most). A route server's thousand files and sessions read every
// second are likely most of the 0.8 CPU-seconds a second aokeyd took
// there with nothing due (issue 52 item 2; not yet measured again).
const execSweep = 10 * time.Second

// execState is the reconciler's state for an Executor's peers: the
// planner, what the last pass observed and the last outcome (status shows
// both), and the last plan submitted per peer (a plan that changes nothing
// is not submitted again: an outcome kicks a pass, which must not submit
// the same plan for ever).
type execState struct {
	plans *execPlanner
	// submit is held by each execSubmit from its read of the desired
	// state to its Submit: the plans reach the executor in the order of
	// their generations, so a pass that read the keys before a revocation
	// was recorded submits before the revoke does, never after it (the
	// executor keeps the latest plan of a peer).
	submit sync.Mutex

	mu      sync.Mutex
	gen     uint64
	seen    map[peer.Key]ExecObserved // replaced whole, never written in place
	planned map[peer.Key]execPlanned  // as seen
	outcome ExecOutcome
	// applied is closed, and replaced, at each outcome: a revoke waits on
	// it for the application of its plans (waitApplied).
	applied chan struct{}
	sent    map[peer.Key]string // a signature of the last plan submitted
	// active are the peers in flight at their last plan (execActive):
	// replaced whole, never written in place.
	active map[peer.Key]bool

	// cancelPass ends the pass's execSubmit under way (nil: none), under
	// mu: a revoke does not wait for a pass's reads of every peer.
	cancelPass context.CancelFunc

	// The pass's gate, the reconcile goroutine's alone: the inputs of the
	// last full pass, when it ran, and the policy time boundary after it.
	last     passInputs
	haveLast bool
	lastFull time.Time
	boundary time.Time
}

// execPlanned is what the last plan of a peer's list decided, for status,
// aoctl plan and the metrics: the keys the never-strand rule kept, the
// list the plan leaves (nil: none; Refused says why), and the names of
// the peer's chain's keys by IDs.
type execPlanned struct {
	Kept    []rotator.Held
	List    *ExecList
	Refused string
	Names   map[execID]string // "chain/key"
	Ops     int
}

func newExecState() *execState {
	return &execState{plans: newExecPlanner(), sent: map[peer.Key]string{}, applied: make(chan struct{})}
}

// execPass is the pass when the daemon serves an Executor
// (Options.Executor). A full pass plans and submits every peer's list
// (execSubmit): the first, then whenever an input changed (the keys, the
// revocations, the policy, aoctl rotate's requests), a policy time
// boundary came, or execSweep passed. Between them a pass plans the
// peers in flight alone (execActive), and with none it is idle: it reads
// nothing.
//
// While a revoke is under way (from before its record to its end) the
// pass plans nothing: the revoke planned every peer it covers, and a
// pass's reads of every file and session it submitted to (all of them
// in flight until read back) took the CPU the speaker's reconfigure and
// the revoke's own read-back need (a route server's 1,000 protocols:
// 1.9 of the revoke's 5.1 CPU-seconds in the guest). Nothing leaves a
// socket by a deferred pass; the first pass after the revoke is full.
func (rc *reconciler) execPass(ctx context.Context) time.Time {
	rc.early.flush()
	now := time.Now()
	es := rc.exec
	if rc.revoking.Load() > 0 {
		es.haveLast = false // the next pass is full
		return now.Add(execPoll)
	}
	in := rc.inputs()
	full := !es.haveLast || in != es.last || (!es.boundary.IsZero() && !now.Before(es.boundary)) || !now.Before(es.lastFull.Add(execSweep))
	var only func(peer.Key) bool
	if !full {
		es.mu.Lock()
		active := es.active
		es.mu.Unlock()
		if len(active) == 0 {
			rc.idlePasses.Add(1)
			return sooner(now.Add(execPoll), es.boundary)
		}
		only = func(id peer.Key) bool { return active[id] }
	}
	pctx, cancel := context.WithCancel(ctx)
	es.mu.Lock()
	es.cancelPass = cancel
	es.mu.Unlock()
	_, _, next := rc.execSubmit(pctx, only, false)
	es.mu.Lock()
	es.cancelPass = nil
	es.mu.Unlock()
	cancelled := pctx.Err() != nil
	cancel()
	if cancelled && ctx.Err() == nil {
		// A revoke began: this pass submitted nothing; the next is full.
		es.haveLast = false
		return now.Add(execPoll)
	}
	if full {
		es.last, es.haveLast, es.lastFull, es.boundary = in, true, now, next
	}
	rc.fullPasses.Add(1)
	return sooner(now.Add(execPoll), es.boundary)
}

// revokeUnderWay holds every full pass (reconcile, execPass) until the
// returned function is called (once or more). With an Executor the pass
// under way gives way at once (execSubmit).
func (rc *reconciler) revokeUnderWay() (done func()) {
	rc.revoking.Add(1)
	if es := rc.exec; es != nil {
		es.mu.Lock()
		if es.cancelPass != nil {
			es.cancelPass() // the pass under way gives way (execSubmit)
		}
		es.mu.Unlock()
	}
	var once sync.Once
	return func() { once.Do(func() { rc.revoking.Add(-1) }) }
}

// execActive reports whether a peer is in flight after its plan pl (ok:
// planned) on ob: a plan was submitted (its application is still to be
// read back), a key the never-strand rule keeps waits for the retire
// proof (its session read about every second), or its session could not
// be read.
func execActive(pl ExecPlan, ok, submitted bool, ob ExecObserved) bool {
	return submitted || ob.Unread != nil || ok && len(pl.Plan.Kept) > 0
}

// execSubmit plans the lists of the executor's peers that only covers (nil:
// every peer) and submits those that change something (force: every one,
// a revoke's, which skips the executor's backoff: ExecPlan.Revoke), each
// with its own copy of the secrets (ExecPlan.own). Each single-address
// binding's peer gets its desired keys: the policy's, the revocations
// scoped to it applied, aoctl rotate's key preferred while its request
// applies. It never waits on the speaker; a
// binding whose keys cannot be computed, or whose chain is degraded in the
// key source, is left as written (nothing submitted for it). It returns
// the peers it planned. The pass and a revoke's request call it; the
// planner and execState are safe for both. gen is the generation of the
// plans submitted (0: none was): an outcome of gen or later applied them,
// or later plans that replaced them. next is the soonest policy time
// boundary of the peers planned (zero: none).
func (rc *reconciler) execSubmit(ctx context.Context, only func(peer.Key) bool, force bool) (ids []peer.Key, gen uint64, next time.Time) {
	rc.exec.submit.Lock()
	defer rc.exec.submit.Unlock()
	now := time.Now()
	snap, release := rc.shared()
	defer release()
	if snap == nil {
		rc.log.Warn("no good key snapshot yet: the executor's lists are left as they are", "executor", rc.o.Executor.Name())
		return nil, 0, time.Time{}
	}
	wants, next := rc.execWants(snap, now, only)
	es := rc.exec
	es.mu.Lock()
	es.gen++
	gen = es.gen
	es.mu.Unlock()
	ids = sortedPeers(wants)
	obs := rc.o.Executor.Observe(ctx, ids)
	if ctx.Err() != nil {
		// Cancelled (a revoke began, or the daemon stops): what Observe
		// read may be partial; nothing is planned or submitted.
		return nil, 0, time.Time{}
	}
	var plans []ExecPlan
	planned := make(map[peer.Key]execPlanned, len(ids))
	active := map[peer.Key]bool{}
	for _, id := range ids {
		pl, ok := es.plans.plan(id, wants[id], obs[id], now, gen, true)
		planned[id] = execPlannedOf(pl, ok, wants[id], obs[id])
		submit := ok && (es.changes(pl, obs[id]) || force)
		if execActive(pl, ok, submit, obs[id]) {
			active[id] = true
		}
		if submit {
			pl.Revoke = force
			pl.own() // the snapshot's secrets are zeroed once it is replaced
			plans = append(plans, pl)
		}
	}
	// New maps each time: status and a revoke read the last ones without
	// the lock.
	es.mu.Lock()
	seen := obs
	if only != nil {
		seen = maps.Clone(es.seen)
		if seen == nil {
			seen = map[peer.Key]ExecObserved{}
		}
		maps.Copy(seen, obs)
		p := maps.Clone(es.planned)
		if p == nil {
			p = map[peer.Key]execPlanned{}
		}
		maps.Copy(p, planned)
		planned = p
		a := maps.Clone(es.active)
		if a == nil {
			a = map[peer.Key]bool{}
		}
		for _, id := range ids {
			delete(a, id)
		}
		maps.Copy(a, active)
		active = a
	}
	es.seen, es.planned, es.active = seen, planned, active
	es.mu.Unlock()
	if len(plans) == 0 {
		return ids, 0, next
	}
	rc.o.Executor.Submit(plans)
	return ids, gen, next
}

// execApplied is the executor's outcome once it applied the plans of
// generation gen (es.waitApplied).
func (rc *reconciler) execApplied(ctx context.Context, gen uint64) (ExecOutcome, bool) {
	return rc.exec.waitApplied(ctx, gen)
}

// waitApplied waits until an outcome of generation gen or later came
// (true), or ctx ended (false), and returns the last outcome.
func (es *execState) waitApplied(ctx context.Context, gen uint64) (ExecOutcome, bool) {
	for {
		es.mu.Lock()
		out, ch := es.outcome, es.applied
		es.mu.Unlock()
		if out.Gen >= gen {
			return out, true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, false
		}
	}
}

// execWants is the desired state at now of every executor peer only
// covers (nil: every one), and the soonest time one of them changes by
// the policy's schedule alone (zero: none).
func (rc *reconciler) execWants(snap *keystore.Snapshot, now time.Time, only func(peer.Key) bool) (wants map[peer.Key]execWant, next time.Time) {
	pol := rc.policy()
	wants = map[peer.Key]execWant{}
	for _, b := range pol.Bindings() {
		if !b.Neighbor.IsSingleIP() {
			continue // a speaker keying its own sockets has one neighbor per protocol
		}
		addr := b.Neighbor.Addr()
		id := peer.KeyOf(addr, b.VRF)
		if only != nil && !only(id) {
			continue
		}
		pk, err := rc.peerDesired(pol, snap, addr, b.VRF, now)
		if err != nil {
			rc.log.Warn("no desired keys for peer: its list is left as it is", "peer", id, "err", err)
			continue
		}
		next = sooner(next, pk.NextChange)
		if snap.Degraded(pk.SourceChain) {
			continue
		}
		if r, why := rc.early.stale(id, pk, now); why != "" {
			rc.log.Info("aoctl rotate's early roll ends; the schedule governs", "peer", id, "key", r.label(), "why", why)
		}
		w := execWant{Keys: pk.Keys, Preferred: rc.early.prefer(id, pk), Names: map[execID]string{}}
		if c := snap.Chains[pk.SourceChain]; c != nil {
			for _, m := range c.Keys {
				w.Names[execID{m.SendID, m.RecvID}] = pk.SourceChain + "/" + m.Name
			}
			for _, name := range slices.Concat(pk.Revoked, pk.Expired) {
				if m, ok := c.Key(name); ok {
					w.Revoked = append(w.Revoked, execRef(execID{m.SendID, m.RecvID}))
				}
			}
		}
		wants[id] = w
	}
	return wants, next
}

// execPeers are the executor's peers: the policy's single-address
// bindings' (aoctl rotate's targets).
func (rc *reconciler) execPeers() []peer.Key {
	var ids []peer.Key
	for _, b := range rc.policy().Bindings() {
		if b.Neighbor.IsSingleIP() {
			ids = append(ids, peer.KeyOf(b.Neighbor.Addr(), b.VRF))
		}
	}
	return ids
}

// execPlannedOf is what status shows of pl (ok: planned; else the desired
// keys could not be planned and nothing was submitted).
func execPlannedOf(pl ExecPlan, ok bool, w execWant, ob ExecObserved) execPlanned {
	p := execPlanned{Names: w.Names}
	if !ok {
		p.Refused = "the desired keys cannot be planned: the list is left as it is"
		return p
	}
	p.Kept, p.Ops = pl.Plan.Kept, len(pl.Plan.Ops)
	if l, err := pl.List(ob.Written.Keys); err != nil {
		p.Refused = err.Error()
	} else {
		p.List = &l
	}
	return p
}

func sortedPeers(wants map[peer.Key]execWant) []peer.Key {
	ids := make([]peer.Key, 0, len(wants))
	for id := range wants {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, peer.Key.Compare)
	return ids
}

// changes reports whether pl is to be submitted: it changes the written
// list (an add, a delete, a revoked key written, another key preferred),
// or differs from the last plan submitted for the peer (a key's
// sendability, which the written list as a socket does not show).
func (es *execState) changes(pl ExecPlan, ob ExecObserved) bool {
	sig := execSignature(pl)
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.sent[pl.Peer] == sig && !execChanges(pl, ob) {
		return false
	}
	es.sent[pl.Peer] = sig
	return true
}

func execChanges(pl ExecPlan, ob ExecObserved) bool {
	if !pl.Plan.Empty() {
		return true
	}
	for _, r := range pl.Revoked {
		if slices.ContainsFunc(ob.Written.Keys, func(k tcpao.KeyInfo) bool { return execIDOf(k.KeyRef) == execIDOf(r) }) {
			return true
		}
	}
	if pl.Preferred < 0 {
		return false
	}
	want := schedExecID(pl.Keys[pl.Preferred])
	return !slices.ContainsFunc(ob.Written.Keys, func(k tcpao.KeyInfo) bool { return k.IsRNext && execIDOf(k.KeyRef) == want })
}

// execSignature is what of pl the written list may not show: its desired
// keys' IDs, material and sendability, the preferred one, the revoked.
func execSignature(pl ExecPlan) string {
	b := []byte{byte(pl.Preferred + 1)}
	for _, k := range pl.Keys {
		fp := k.MKT.Secret.Fingerprint()
		b = append(b, k.MKT.SendID, k.MKT.RecvID)
		if k.Sendable {
			b = append(b, 1)
		}
		b = append(append(b, fp[:]...), k.MKT.Algorithm...)
	}
	for _, r := range pl.Revoked {
		b = append(b, 0xff, r.SendID, r.RecvID)
	}
	return string(b)
}

// execDone is Run's outcome: kept for status, and a successful one kicks
// a pass (the next plan starts from the list it wrote). A failed one does
// not: the list is as it was, the next poll plans it again.
func (rc *reconciler) execDone(o ExecOutcome) {
	rc.exec.mu.Lock()
	rc.exec.outcome = o
	close(rc.exec.applied)
	rc.exec.applied = make(chan struct{})
	rc.exec.mu.Unlock()
	if o.ConfigureErr == nil && len(o.Failed) == 0 {
		rc.wake()
	}
}

// runExecutor runs ex until ctx ends (Daemon.Run's supervised piece beside
// the passes), restarting it when it fails.
func (rc *reconciler) runExecutor(ctx context.Context, ex Executor) {
	for ctx.Err() == nil {
		err := ex.Run(ctx, rc.execDone)
		if ctx.Err() != nil {
			return
		}
		rc.log.Warn("executor ended; retrying", "executor", ex.Name(), "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
