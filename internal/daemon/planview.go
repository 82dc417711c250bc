package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/rotator"
)

// plan is Daemon.Plan (control.Backend): a dry run against the kernel's state
// now.
func (rc *reconciler) plan(ctx context.Context) (control.PlanReport, error) {
	now := time.Now()
	rep := control.PlanReport{GeneratedAt: now, Observed: true}
	snap, release := rc.shared()
	defer release()
	if snap == nil {
		return rep, errors.New("no good key snapshot yet")
	}
	for _, h := range rc.holds(snap) {
		l := holdPlanLine(h)
		rep.Plan = append(rep.Plan, l)
		rep.Steps = append(rep.Steps, control.PlanStep{Op: "held back", Chain: h.Chain, Key: h.Key, Reason: h.Reason.String(), Text: l})
	}
	var in []rotator.Input
	var gs []gated // the listeners without the start-up gate, while it holds
	md5 := newMD5Want()
	v4, v6, _, _, frozen := rc.listenerDesired(snap, now, &md5)
	defer zeroDesired(v4, v6)
	defer md5.zero()
	// As the listener sync sees them: the keys the sessions up carry,
	// when they were all read (an edit whose peer is down and fails
	// against it: rotator.DownWatch).
	up, complete := rc.carriedUp()
	if hs, err := rc.tracker.Listeners(ctx); err == nil {
		have4 := slices.ContainsFunc(hs, func(h bgp.SocketHandle) bool { return h.Ref().Local.Addr().Unmap().Is4() })
		for _, h := range hs {
			// As the listener sync plans it.
			want := listenerWantOf(h.Ref(), v4, v6, have4)
			want.Frozen = frozenKeys(frozen)
			want.Owner = rc.owns.owner(h.Ref().PID)
			obs, err := rotator.Observe(rc.o.SocketOf(h), rotator.ReadFull)
			if err != nil {
				return rep, fmt.Errorf("observe %s: %w", h.Ref(), err)
			}
			obs.Carried = rc.ctrl.Carried()
			li := rotator.Input{Desired: want, Observed: obs, SyncDeletes: rc.syncListenerDeletes()}
			if rc.gate.Load() != nil {
				without := li
				li.Desired.Frozen = append(slices.Clip(want.Frozen), holdAll...)
				gs = append(gs, gated{under: li, without: without})
			} else if complete {
				li.Observed.Down = rc.down.Peek(want.Socket, &li.Observed, up)
			}
			in = append(in, li)
		}
	}
	for _, p := range rc.table.peerList() {
		if p.handle == nil {
			continue
		}
		want, _, err := rc.desiredFor(snap, p, now)
		if err != nil {
			continue
		}
		defer zeroDesired(want)
		obs, err := rotator.Observe(rc.o.SocketOf(p.handle), rotator.ReadFull)
		if err != nil {
			continue
		}
		if st, ok := rc.ctrl.StatusOf(p.id); ok {
			obs.Settled = st.Settled(obs) // the machine's own view (rotator/settle.go)
		}
		in = append(in, rotator.Input{Desired: want, Observed: obs})
	}
	// Plan's lines as they were (their readers match them), and each as
	// a step naming its key where the snapshot has exactly one of its IDs.
	lines, steps := desired.PlanSteps(in, desired.SnapshotNamer(snap))
	rep.Plan = append(rep.Plan, lines...)
	rep.Steps = append(rep.Steps, steps...)
	lines, steps = gateHeld(gs, desired.SnapshotNamer(snap))
	rep.Plan = append(rep.Plan, lines...)
	rep.Steps = append(rep.Steps, steps...)
	for _, l := range rc.md5PlanLines(ctx, md5) {
		rep.Plan = append(rep.Plan, l)
		rep.Steps = append(rep.Steps, control.PlanStep{Op: "tcp-md5", Text: l})
	}
	for _, r := range rc.migrs.All() {
		switch r.Step {
		case migrate.Prepared:
			rep.Upcoming = append(rep.Upcoming, control.Event{Peer: r.Peer.Addr.String(), VRF: r.Peer.VRF, At: r.At, Action: "migration to TCP-AO: the far end switches"})
			fallthrough
		case migrate.Switching:
			rep.Upcoming = append(rep.Upcoming, control.Event{Peer: r.Peer.Addr.String(), VRF: r.Peer.VRF, At: r.Deadline(),
				Action: "migration to TCP-AO rolls back unless a TCP-AO session is up"})
		}
	}
	pol := rc.policy()
	for _, p := range rc.table.peerList() {
		// An aoctl rotate in force: the peer sends with its key until the
		// schedule does.
		if r, ok := rc.early.get(p.id); ok && r.key.Start.After(now) {
			chain := ""
			if b, err := pol.BindingForKey(p.info.Key()); err == nil {
				chain = b.KeyChain
			}
			rep.Upcoming = append(rep.Upcoming, control.Event{Peer: p.info.Neighbor.String(), VRF: p.info.VRF, Chain: chain, At: r.key.Start,
				Action: "aoctl rotate's early roll to " + r.label() + " ends: the schedule sends with it from here"})
		}
	}
	for _, b := range pol.Bindings() {
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err == nil && !pk.NextChange.IsZero() {
			rep.Upcoming = append(rep.Upcoming, control.Event{Peer: b.Neighbor.String(), VRF: b.VRF, Chain: b.KeyChain, At: pk.NextChange, Action: "key set changes (lifetime boundary)"})
		}
	}
	return rep, nil
}
