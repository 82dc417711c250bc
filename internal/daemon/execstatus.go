package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/chainview"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
)

// execView is what the last pass observed of the executor's peers and the
// last outcome of its Run (nil, zero: no pass yet, or no Executor).
func (rc *reconciler) execView() (map[peer.Key]ExecObserved, ExecOutcome) {
	seen, _, out := rc.execViews()
	return seen, out
}

// execViews is execView with what the last plan of each peer decided.
func (rc *reconciler) execViews() (map[peer.Key]ExecObserved, map[peer.Key]execPlanned, ExecOutcome) {
	if rc.exec == nil {
		return nil, nil, ExecOutcome{}
	}
	rc.exec.mu.Lock()
	defer rc.exec.mu.Unlock()
	return rc.exec.seen, rc.exec.planned, rc.exec.outcome
}

// execKeptWhy says in words why the never-strand rule keeps a written
// key no longer desired in peer's list (ob: what the pass observed).
func execKeptWhy(h rotator.Held, ob ExecObserved, names map[execID]string) string {
	if h.Why == rotator.ReasonEdited {
		return fmt.Sprintf("key %s was edited in place in the key source: the speaker keeps the written material (give the new material new IDs)", names[execIDOf(h.Ref)])
	}
	switch {
	case ob.Unread != nil:
		return fmt.Sprintf("no longer desired, but the session with this neighbor could not be read (%v): kept until it can be seen to have switched", ob.Unread)
	case ob.Session == nil:
		return "no longer desired, but no session is up: kept for the next reconnect"
	}
	return "no longer desired, but the peer still sends with it (or was not yet seen sending with a desired key): kept until it has switched"
}

// execKeyName is "chain/key (send=S recv=R)", or the IDs alone.
func execKeyName(id execID, names map[execID]string) string {
	if n := names[id]; n != "" {
		return fmt.Sprintf("%s (send=%d recv=%d)", n, id[0], id[1])
	}
	return fmt.Sprintf("send=%d recv=%d", id[0], id[1])
}

// execPeerWarnings are the warnings of one executor peer's plan: what was
// kept against the desired state and why, and a refused plan.
func execPeerWarnings(where string, ob ExecObserved, pp execPlanned) []string {
	var ws []string
	for _, h := range pp.Kept {
		ws = append(ws, fmt.Sprintf("key %s kept in %s: %s", execKeyName(execIDOf(h.Ref), pp.Names), where, execKeptWhy(h, ob, pp.Names)))
	}
	if pp.List != nil && pp.List.NoSendable {
		if i := slices.IndexFunc(pp.List.Keys, func(k ExecListKey) bool { return k.Preferred }); i >= 0 {
			ws = append(ws, fmt.Sprintf("key %s kept in %s: no key has a send lifetime covering now: the speaker keeps sending with it (add a key with a current send lifetime)",
				execKeyName(execIDOf(pp.List.Keys[i].Ref), pp.Names), where))
		}
	}
	if pp.Refused != "" {
		ws = append(ws, pp.Refused)
	}
	return ws
}

// execStatus is status when the daemon serves an Executor: each peer's
// session as the speaker reports it, the keys of its session as the
// kernel holds them (read, never written), and what the last pass and
// the last application found. peerArg "" is every peer. The peers are
// read for it (Executor.Observe): a pass reads a peer whose list is
// settled only every execSweep.
func (sv *statusView) execStatus(ctx context.Context, peerArg string) (control.StatusReport, error) {
	now := time.Now()
	cs := sv.o.Keys.Status()
	rep := control.StatusReport{GeneratedAt: now, Speaker: sv.o.Executor.Name(), Peers: []control.PeerStatus{},
		KeySource: control.KeySourceStatus{Name: cs.Source, LastSync: cs.LastGood, Age: control.Duration(cs.Age),
			Stale: !cs.HaveSnapshot || cs.Age > sv.o.StaleAfter}}
	if cs.LastError != nil {
		rep.KeySource.LastError = cs.LastError.Error()
	}
	if w := sv.revs.Warning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	rep.Warnings = append(rep.Warnings, sv.early.warnings()...)
	if w := sv.configWarn.Load(); w != nil {
		rep.Warnings = append(rep.Warnings, *w...)
	}
	seen, planned, out := sv.recon.execViews()
	if out.ConfigureErr != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s was not reconfigured: %v: every list was put back", sv.o.Executor.Name(), out.ConfigureErr))
	}
	ids := make([]peer.Key, 0, len(seen))
	for id := range seen {
		if peerArg == "" || peerArg == id.Addr.String() || peerArg == id.String() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, peer.Key.Compare)
	fresh := sv.o.Executor.Observe(ctx, ids)
	for _, id := range ids {
		ob, pp := seen[id], planned[id]
		if f, ok := fresh[id]; ok {
			ob = f
		}
		where := execWhere(sv.o.Executor, id, ob)
		// The speaker keys its own connects as its listener: its active
		// opens are always keyed.
		ps := control.PeerStatus{Peer: id.Addr.String(), VRF: id.VRF, SessionState: "unknown", Sockets: []control.Socket{}, Keys: []control.Key{},
			Warnings: slices.Clone(ob.Warnings), ActiveOpensKeyed: true,
			Rotation: control.Rotation{State: "native", NextAction: sv.o.Executor.Name() + " sends with the preferred key of " + where}}
		if p := ob.Protocol; p != nil {
			ps.SessionState = bgp.ParseSessionState(p.BGPState).String()
			ps.Counters = control.Counters{PktGood: p.PktGood, PktBad: p.PktBad}
			ps.LastDownReason = p.LastError
		}
		if ob.Unread != nil {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("the session could not be read from the kernel: %v: no key leaves its list until it can be", ob.Unread))
		}
		if err := out.Failed[id]; err != nil {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("its list was refused: %v: left as it was", err))
		}
		ps.Warnings = append(ps.Warnings, out.Warnings[id]...)
		ps.Warnings = append(ps.Warnings, execPeerWarnings(where, ob, pp)...)
		if ob.Session != nil {
			for _, k := range ob.Session.Keys {
				ck := control.Key{SendID: k.SendID, RecvID: k.RecvID, Alg: string(k.Algorithm), MACLen: k.MACLen,
					Current: k.IsCurrent, RNext: k.IsRNext, PktGood: k.PktGood, PktBad: k.PktBad, State: control.KeyInstalled}
				kid := execID{k.SendID, k.RecvID}
				ck.Chain, ck.Name, _ = strings.Cut(pp.Names[kid], "/")
				if slices.ContainsFunc(pp.Kept, func(h rotator.Held) bool { return execIDOf(h.Ref) == kid }) {
					ck.State = control.KeyRetiring
				}
				ps.Keys = append(ps.Keys, ck)
				kn := &control.KeyName{Chain: ck.Chain, Name: ck.Name, SendID: ck.SendID, RecvID: ck.RecvID}
				if k.IsCurrent {
					ps.Sending = kn
				}
				if k.IsRNext {
					ps.PeerSending = kn
				}
			}
		}
		rep.Peers = append(rep.Peers, ps)
	}
	if peerArg != "" && len(rep.Peers) == 0 {
		return rep, fmt.Errorf("peer %q: %w", peerArg, control.ErrNotFound)
	}
	if peerArg == "" {
		snap, release := sv.shared()
		if snap != nil {
			rep.Chains = chainview.Chains(sv.policy(), snap, now)
		}
		release()
	}
	return rep, nil
}

// execPlan is aoctl plan when the daemon serves an Executor: each peer's
// list as the next pass would leave it (IDs and flags, "p" preferred, "d"
// deprecated), what the never-strand rule keeps and why, and the warnings
// of the read. A dry run: nothing is submitted, no base is recorded.
func (rc *reconciler) execPlan(ctx context.Context) (control.PlanReport, error) {
	now := time.Now()
	rep := control.PlanReport{GeneratedAt: now, Observed: true, Plan: []string{}}
	snap, release := rc.shared()
	defer release()
	if snap == nil {
		return rep, errors.New("no good key snapshot yet")
	}
	wants, _ := rc.execWants(snap, now, nil)
	ids := sortedPeers(wants)
	obs := rc.o.Executor.Observe(ctx, ids)
	name := rc.o.Executor.Name()
	for _, id := range ids {
		ob := obs[id]
		pl, ok := rc.exec.plans.plan(id, wants[id], ob, now, 0, false)
		pp := execPlannedOf(pl, ok, wants[id], ob)
		where := execWhere(rc.o.Executor, id, ob)
		what := "unchanged"
		if ok && execChanges(pl, ob) {
			what = "write"
		}
		list := "refused"
		if pp.List != nil {
			list = pp.List.String()
		}
		rep.Plan = append(rep.Plan, fmt.Sprintf("%s %s %s: %s [%s]", name, id, strings.TrimPrefix(where, name+" "), what, list))
		for _, w := range slices.Concat(ob.Warnings, execPeerWarnings(where, ob, pp)) {
			rep.Plan = append(rep.Plan, fmt.Sprintf("%s %s warning: %s", name, id, w))
		}
	}
	return rep, nil
}

// observeExecMetrics is a scrape's view when the daemon serves an
// Executor: each peer's per-key counters, Current_key and RNext_key as
// the speaker's session holds them (the series the other speakers'
// sessions have), and the keys the never-strand rule keeps.
func (sv *statusView) observeExecMetrics(m *metrics.Metrics) {
	seen, planned, _ := sv.recon.execViews()
	now := time.Now()
	var kept []metrics.Kept
	for id, ob := range seen {
		p := metrics.Peer{Addr: id.Addr.String(), VRF: id.VRF}
		pp := planned[id]
		for _, h := range pp.Kept {
			kept = append(kept, metrics.Kept{Peer: p.Addr, VRF: p.VRF, Socket: sv.o.Executor.Name() + "-list", SendID: h.Ref.SendID, RecvID: h.Ref.RecvID, Reason: h.Why.String()})
		}
		if ob.Session == nil {
			continue
		}
		var kcs []metrics.KeyCounters
		var cur, rnext *uint8
		for _, k := range ob.Session.Keys {
			kcs = append(kcs, metrics.KeyCounters{Key: pp.Names[execID{k.SendID, k.RecvID}], SendID: k.SendID, RecvID: k.RecvID, PktGood: k.PktGood, PktBad: k.PktBad})
			if k.IsCurrent {
				cur = &k.SendID
			}
			if k.IsRNext {
				rnext = &k.RecvID
			}
		}
		m.ObserveKeys(p, kcs)
		m.SetPeerKeys(p, cur, rnext, len(ob.Session.Keys))
		m.SetCountersReadAt(p, now)
	}
	m.SetKept(kept)
}

// capOp is an aoctl command a kind of speaker may not carry out
// (speakers.Caps: Replace, Adopt, Migrate).
type capOp uint8

const (
	opReplace capOp = iota + 1
	opAdopt
	opMigrate
)

// refuses is why op is refused with this speaker (nil: carried out), as
// its kind's Caps say (Options.Kind). Without a kind, a Speaker's sockets
// are aokeyd's to key (every op is carried out) and an Executor's speaker
// keys its own (none is).
func (co *core) refuses(op capOp) error {
	k := co.o.Kind
	if k.Name == "" {
		if co.o.Executor == nil {
			return nil
		}
		k.Name, k.Title = co.o.Executor.Name(), co.o.Executor.Name()
	}
	t := k.Title
	switch {
	case op == opReplace && !k.Caps.Replace:
		return fmt.Errorf("aoctl replace: with speaker.type %s an edit in place is not applied: give the new material new IDs in the key source and let aokeyd roll %s to it: %w", k.Name, t, control.ErrInvalid)
	case op == opAdopt && !k.Caps.Adopt:
		return fmt.Errorf("aoctl adopt: with speaker.type %s aokeyd writes %s's key lists and never its sockets; a key in %s's own configuration is %s's: %w", k.Name, t, t, t, control.ErrInvalid)
	case op == opMigrate && !k.Caps.Migrate:
		return fmt.Errorf("aoctl migrate: with speaker.type %s aokeyd does not run TCP-MD5 to TCP-AO migrations yet: %s's own password line stays %s's; "+
			"give the neighbor TCP-AO keys in the key source and remove the password from %s's configuration in one reconfigure: %w", k.Name, t, t, t, control.ErrInvalid)
	}
	return nil
}
