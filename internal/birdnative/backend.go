package birdnative

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/chainview"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/internal/metrics"
)

var _ control.Backend = (*Driver)(nil)

// Status implements control.Backend from the last pass's views: each
// neighbor's session as BIRD reports it, the keys of BIRD's established
// socket as the kernel holds them (read, never written), the file's keys
// and what the never-strand rule keeps, and why BIRD was not reconfigured.
func (d *Driver) Status(_ context.Context, peerArg string) (control.StatusReport, error) {
	now := d.o.Now()
	cs := d.o.Keys.Status()
	rep := control.StatusReport{GeneratedAt: now, Speaker: "bird (native: keys through " + d.o.Dir + ", " + d.o.Control + ")",
		KeySource: control.KeySourceStatus{Name: cs.Source, LastSync: cs.LastGood, Age: control.Duration(cs.Age)}, Peers: []control.PeerStatus{}}
	if cs.LastError != nil {
		rep.KeySource.LastError = cs.LastError.Error()
	}
	cfgErr := d.configErr()
	d.mu.Lock()
	views := d.views
	rep.Warnings = append(rep.Warnings, d.configWarn...)
	d.mu.Unlock()
	if cfgErr != "" {
		rep.Warnings = append(rep.Warnings, cfgErr)
	}
	if w := d.revoked.Warning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	for _, v := range views {
		if peerArg != "" && peerArg != v.ID.Addr.String() && peerArg != v.ID.String() {
			continue
		}
		// BIRD puts the keys of its key file on its own connects as on
		// its listener: its active opens are always keyed.
		ps := control.PeerStatus{Peer: v.ID.Addr.String(), VRF: v.ID.VRF, SessionState: "unknown", Sockets: []control.Socket{}, Keys: []control.Key{},
			Warnings: slices.Clone(v.Warnings), ActiveOpensKeyed: true}
		if p := v.Protocol; p != nil {
			ps.SessionState = bgp.ParseSessionState(p.BGPState).String()
			ps.Counters = control.Counters{PktGood: p.PktGood, PktBad: p.PktBad}
			ps.LastDownReason = p.LastError // BIRD's "Last error": why it last went down
		}
		ps.Rotation = control.Rotation{State: "native", NextAction: "BIRD sends with the preferred key of " + v.File}
		for _, k := range v.Session {
			id := ids{k.SendID, k.RecvID}
			ck := control.Key{SendID: k.SendID, RecvID: k.RecvID, Alg: string(k.Algorithm), MACLen: k.MACLen,
				Current: k.IsCurrent, RNext: k.IsRNext, PktGood: k.PktGood, PktBad: k.PktBad, State: control.KeyInstalled}
			ck.Chain, ck.Name = splitName(v.Names[id])
			if slices.ContainsFunc(v.Kept, func(c kept) bool { return c.ID == id }) {
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
		for _, c := range v.Kept {
			name := v.Names[c.ID]
			if name == "" {
				name = fmt.Sprintf("send=%d recv=%d", c.ID[0], c.ID[1])
			}
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("key %s (send=%d recv=%d) kept in %s: %s", name, c.ID[0], c.ID[1], v.File, c.Why))
		}
		rep.Peers = append(rep.Peers, ps)
	}
	if peerArg != "" && len(rep.Peers) == 0 {
		return rep, fmt.Errorf("peer %q: %w", peerArg, control.ErrNotFound)
	}
	if peerArg == "" {
		if snap := d.o.Keys.Current(); snap != nil {
			rep.Chains = chainview.Chains(d.policy(), snap, now)
			snap.Zero()
		}
	}
	return rep, nil
}

func splitName(n string) (chain, key string) {
	for i := range n {
		if n[i] == '/' {
			return n[:i], n[i+1:]
		}
	}
	return "", n
}

// Plan implements control.Backend: each neighbor's file as the next pass
// would write it (IDs and flags), and what it keeps; nothing is written.
func (d *Driver) Plan(ctx context.Context) (control.PlanReport, error) {
	rep := control.PlanReport{GeneratedAt: d.o.Now(), Observed: true, Plan: []string{}}
	snap := d.o.Keys.Current()
	if snap == nil {
		return rep, errors.New("no good key snapshot yet")
	}
	defer snap.Zero()
	views, changes := d.plan(ctx, snap, d.o.Now(), nil, false)
	defer func() {
		for _, c := range changes {
			clear(c.next)
		}
	}()
	for i, v := range views {
		what := "unchanged"
		if slices.ContainsFunc(changes, func(c change) bool { return c.view == i }) {
			what = "write"
		}
		rep.Plan = append(rep.Plan, fmt.Sprintf("bird %s %s: %s [%s]", v.ID, v.File, what, keyIDs(v.Keys)))
		for _, c := range v.Kept {
			rep.Plan = append(rep.Plan, fmt.Sprintf("bird %s keep send=%d recv=%d: %s", v.ID, c.ID[0], c.ID[1], c.Why))
		}
		for _, w := range v.Warnings {
			rep.Plan = append(rep.Plan, fmt.Sprintf("bird %s warning: %s", v.ID, w))
		}
	}
	return rep, nil
}

// Rotate implements control.Backend: BIRD prefers, from the next pass on,
// the key that is the newest for the peer now, ahead of its send time,
// until the schedule reaches it; that key, not whichever is newest later
// (early.Key).
func (d *Driver) Rotate(_ context.Context, req control.RotateRequest) (control.RotateResult, error) {
	var res control.RotateResult
	snap := d.o.Keys.Current()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	defer snap.Zero()
	pol, now := d.policy(), d.o.Now()
	d.mu.Lock()
	views := d.views
	d.mu.Unlock()
	for _, v := range views {
		if !req.All && (v.ID.Addr.String() != req.Peer || req.VRF != "" && req.VRF != v.ID.VRF) {
			continue
		}
		out := control.RotateOutcome{Peer: v.ID.Addr.String(), VRF: v.ID.VRF, State: "native"}
		pk, err := pol.Desired(snap, v.ID.Addr, v.ID.VRF, now)
		if err == nil {
			d.scope(&pk, snap, v.ID)
		}
		n := early.Newest(pk, now)
		switch {
		case err != nil:
			out.Error = err.Error()
		case n < 0 || n == pk.Preferred:
			out.Detail = "no newer key in the key source for this peer; add one (or wait for the schedule)"
		default:
			k := early.KeyOf(pk, n)
			d.mu.Lock()
			d.early[v.ID] = k
			d.mu.Unlock()
			out.Started = true
			out.Detail = "rolling to " + k.Label() + ": BIRD's file prefers it from the next pass until its send start"
		}
		res.Peers = append(res.Peers, out)
	}
	if len(res.Peers) == 0 {
		return res, fmt.Errorf("peer %q is not one of BIRD's neighbors aokeyd keys: %w", req.Peer, control.ErrNotFound)
	}
	d.Kick()
	return res, nil
}

// Replace implements control.Backend: not with BIRD.
func (d *Driver) Replace(context.Context, control.ReplaceRequest) (control.ReplaceResult, error) {
	return control.ReplaceResult{}, fmt.Errorf("%w: with speaker type bird an edit in place is not applied: give the new material new IDs in the key source and let aokeyd roll BIRD to it", control.ErrInvalid)
}

// Adopt implements control.Backend: not with BIRD, whose keys aokeyd
// writes through its configuration and never on its sockets.
func (d *Driver) Adopt(context.Context, control.AdoptRequest) (control.AdoptResult, error) {
	return control.AdoptResult{}, fmt.Errorf("%w: with speaker type bird aokeyd writes BIRD's key files and never its sockets; a key in BIRD's own configuration is BIRD's", control.ErrInvalid)
}

// metricsOf publishes a pass's views: each neighbor's per-key counters,
// Current_key and RNext_key as BIRD's session socket holds them (the
// series the other speakers' sessions have), and the kept keys
// (aokeyd_keys_kept, reason carried).
func (d *Driver) metricsOf(views []peerView) {
	m := d.o.Metrics
	if m == nil {
		return
	}
	var out []metrics.Kept
	now := d.o.Now()
	for _, v := range views {
		p := metrics.Peer{Addr: v.ID.Addr.String(), VRF: v.ID.VRF}
		for _, c := range v.Kept {
			out = append(out, metrics.Kept{Peer: p.Addr, VRF: p.VRF, Socket: "bird-file", SendID: c.ID[0], RecvID: c.ID[1], Reason: "carried"})
		}
		if v.Session == nil {
			continue
		}
		var kcs []metrics.KeyCounters
		var cur, rnext *uint8
		for _, k := range v.Session {
			kcs = append(kcs, metrics.KeyCounters{Key: v.Names[ids{k.SendID, k.RecvID}], SendID: k.SendID, RecvID: k.RecvID, PktGood: k.PktGood, PktBad: k.PktBad})
			if k.IsCurrent {
				cur = &k.SendID
			}
			if k.IsRNext {
				rnext = &k.RecvID
			}
		}
		m.ObserveKeys(p, kcs)
		m.SetPeerKeys(p, cur, rnext, len(v.Session))
		m.SetCountersReadAt(p, now)
	}
	m.SetKept(out)
}

// Migrate implements control.Backend: not with BIRD driven natively yet.
func (d *Driver) Migrate(context.Context, control.MigrateRequest) (control.MigrateResult, error) {
	return control.MigrateResult{}, fmt.Errorf("%w: with speaker type bird aokeyd does not run TCP-MD5 to TCP-AO migrations yet: "+
		"BIRD's own password line stays BIRD's; give the neighbor TCP-AO keys in the key source and remove the password from BIRD's configuration in one reconfigure", control.ErrInvalid)
}

// SetConfigWarnings replaces the warnings about the configuration that
// status shows: the settings a reload could not apply (each waits for a
// restart).
func (d *Driver) SetConfigWarnings(w []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.configWarn = slices.Clone(w)
}
