package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/metrics"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

var _ control.Backend = (*Daemon)(nil)

// keyName maps installed keys back to the MKTs they came from.
type keyName struct {
	chain string
	mkt   keystore.MKT
}

func mktIndex(snap *keystore.Snapshot, chain string) map[[2]uint8]keyName {
	out := map[[2]uint8]keyName{}
	if snap == nil {
		return out
	}
	if c := snap.Chains[chain]; c != nil {
		for _, m := range c.Keys {
			out[[2]uint8{m.SendID, m.RecvID}] = keyName{chain: chain, mkt: m}
		}
	}
	return out
}

// Status implements control.Backend.
func (d *Daemon) Status(ctx context.Context, peer string) (control.StatusReport, error) {
	now := d.o.Clock.Now()
	cs := d.o.Keys.Status()
	rep := control.StatusReport{
		GeneratedAt: now,
		KeySource: control.KeySourceStatus{
			Name: cs.Source, LastSync: cs.LastGood, Age: control.Duration(cs.Age),
			Stale: !cs.HaveSnapshot || cs.Age > d.o.StaleAfter,
		},
	}
	if cs.LastError != nil {
		rep.KeySource.LastError = cs.LastError.Error()
	}
	d.mu.Lock()
	rep.Optmem = control.Optmem{Limit: d.optmem[0], Needed: d.optmem[1]}
	d.mu.Unlock()
	// Stale-source, optmem and not-passive warnings are derived from these
	// fields (StatusReport.Complete, below).
	snap, release := d.shared()
	defer release()
	for _, h := range d.holds(snap) {
		rep.KeySource.Held = append(rep.KeySource.Held, heldKey(h))
		rep.Warnings = append(rep.Warnings, holdWarning(h))
	}

	infos, err := d.o.Speaker.Peers(ctx)
	if err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("speaker %s unreachable: %v", d.o.Speaker.Name(), err))
		for _, p := range d.peerList() {
			infos = append(infos, p.info)
		}
	}
	rot := map[rotator.PeerID]rotator.Status{}
	for _, s := range d.ctrl.Status() {
		rot[s.Peer] = s
	}
	var listeners []control.Socket
	if hs, err := d.tracker.Listeners(ctx); err == nil {
		for _, h := range hs {
			r := h.Ref()
			listeners = append(listeners, control.Socket{Kind: control.KindListen, Local: r.Local.String(), Inode: r.Inode})
		}
	}
	found := false
	for _, info := range infos {
		id := PeerIDOf(info.Neighbor, info.VRF)
		if peer != "" && peer != string(id) && peer != info.Neighbor.String() {
			continue
		}
		if !d.managed(info) {
			if peer != "" {
				return rep, fmt.Errorf("peer %s has no TCP-AO binding in the policy: %w", peer, control.ErrNotFound)
			}
			continue
		}
		found = true
		rep.Peers = append(rep.Peers, d.peerStatus(snap, info, rot[id], listeners, now))
	}
	if peer != "" && !found {
		return rep, fmt.Errorf("peer %s: %w", peer, control.ErrNotFound)
	}
	rep.Complete()
	return rep, nil
}

func (d *Daemon) peerStatus(snap *keystore.Snapshot, info bgp.PeerInfo, rs rotator.Status, listeners []control.Socket, now time.Time) control.PeerStatus {
	id := PeerIDOf(info.Neighbor, info.VRF)
	ps := control.PeerStatus{
		Peer: info.Neighbor.String(), VRF: info.VRF, SessionState: info.State.String(),
		Passive: info.Passive, Sockets: slices.Clone(listeners),
	}
	if info.Established() && !info.Uptime.IsZero() {
		ps.Uptime = control.Duration(now.Sub(info.Uptime).Truncate(time.Second))
	}
	if info.MD5 {
		ps.Warnings = append(ps.Warnings, "neighbor has a TCP-MD5 password: the kernel refuses TCP-AO next to MD5 (EKEYREJECTED)")
	}
	var h bgp.SocketHandle
	if p := d.peer(id); p != nil {
		h = p.handle
	}

	var pk policy.PeerKeys
	if snap != nil {
		var err error
		pk, err = d.policy().Desired(snap, info.Neighbor, info.VRF, now)
		if err != nil {
			ps.Warnings = append(ps.Warnings, "policy: "+err.Error())
		} else if snap.Degraded(pk.SourceChain) {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("key chain %s: %v", pk.SourceChain, errFrozen))
		}
	}
	names := mktIndex(snap, pk.SourceChain)
	desired := map[[2]uint8]policy.DesiredKey{}
	for _, k := range pk.Keys {
		desired[[2]uint8{k.MKT.SendID, k.MKT.RecvID}] = k
	}
	ps.Rotation = control.Rotation{State: string(rs.State), Since: rs.Since, NextAction: rs.NextAction, NextAt: rs.NextAt, LastAbortReason: rs.LastAbort}
	if rs.HavePending {
		if n, ok := names[[2]uint8{rs.Pending.SendID, rs.Pending.RecvID}]; ok {
			ps.Rotation.PendingKey = n.chain + "/" + n.mkt.Name
		} else {
			ps.Rotation.PendingKey = rs.Pending.String()
		}
	}
	if h == nil {
		if ps.Rotation.State == "" {
			ps.Rotation.State = string(rotator.StateDown)
		}
		for _, k := range pk.Keys {
			ps.Keys = append(ps.Keys, statusKey(pk.SourceChain, k.MKT, k.SendLifetime, k.AcceptLifetime, control.KeyPending))
		}
		return ps
	}
	r := h.Ref()
	ps.Sockets = append(ps.Sockets, control.Socket{Kind: control.KindEstablished, Local: r.Local.String(), Remote: r.Remote.String(), Inode: r.Inode})
	obs, err := rotator.Observe(d.o.SocketOf(h))
	if err != nil {
		ps.Warnings = append(ps.Warnings, "reading the session's TCP-AO state: "+err.Error())
		return ps
	}
	ps.Counters = control.Counters{PktGood: obs.Info.PktGood, PktBad: obs.Info.PktBad, PktKeyNotFound: obs.Info.PktKeyNotFound, PktAORequired: obs.Info.PktAORequired}
	for _, ki := range obs.Keys {
		ids := [2]uint8{ki.SendID, ki.RecvID}
		n, known := names[ids]
		dk, want := desired[ids]
		state := control.KeyInstalled
		switch {
		case known && n.mkt.Revoked:
			state = control.KeyRevoked
		case !want:
			state = control.KeyRetiring
		case rs.HavePending && rs.Pending.SendID == ki.SendID && rs.Pending.RecvID == ki.RecvID:
			state = control.KeyPending
		}
		k := control.Key{SendID: ki.SendID, RecvID: ki.RecvID, Alg: string(ki.Algorithm), MACLen: ki.MACLen,
			Current: ki.IsCurrent, RNext: ki.IsRNext, PktGood: ki.PktGood, PktBad: ki.PktBad, State: state}
		if known {
			k.Chain, k.Name = n.chain, n.mkt.Name
			k.SendLifetime = control.Lifetime{Start: n.mkt.SendLifetime.Start, End: n.mkt.SendLifetime.End}
			k.AcceptLifetime = control.Lifetime{Start: n.mkt.AcceptLifetime.Start, End: n.mkt.AcceptLifetime.End}
		}
		if want {
			k.SendLifetime = control.Lifetime{Start: dk.SendLifetime.Start, End: dk.SendLifetime.End}
			k.AcceptLifetime = control.Lifetime{Start: dk.AcceptLifetime.Start, End: dk.AcceptLifetime.End}
		}
		ps.Keys = append(ps.Keys, k)
	}
	if obs.Info.PktBad > 0 {
		ps.Warnings = append(ps.Warnings, fmt.Sprintf("%d segments failed TCP-AO verification", obs.Info.PktBad))
	}
	return ps
}

func statusKey(chain string, m keystore.MKT, send, accept keystore.Lifetime, state string) control.Key {
	return control.Key{Chain: chain, Name: m.Name, SendID: m.SendID, RecvID: m.RecvID, Alg: string(m.Algorithm), MACLen: m.MACLen,
		SendLifetime: control.Lifetime{Start: send.Start, End: send.End}, AcceptLifetime: control.Lifetime{Start: accept.Start, End: accept.End},
		State: state}
}

// Plan implements control.Backend: a dry run against the kernel's state
// now.
func (d *Daemon) Plan(ctx context.Context) (control.PlanReport, error) {
	now := d.o.Clock.Now()
	rep := control.PlanReport{GeneratedAt: now, Observed: true}
	snap, release := d.shared()
	defer release()
	if snap == nil {
		return rep, errors.New("no good key snapshot yet")
	}
	for _, h := range d.holds(snap) {
		rep.Plan = append(rep.Plan, holdPlanLine(h))
	}
	var in []rotator.Input
	v4, v6, _, _, frozen := d.listenerDesired(snap, now)
	defer zeroDesired(v4, v6)
	if hs, err := d.tracker.Listeners(ctx); err == nil {
		for _, h := range hs {
			want := v6
			if h.Ref().Local.Addr().Unmap().Is4() {
				want = v4
			}
			want.Socket = rotator.SocketID("listen " + h.Ref().Local.String())
			obs, err := rotator.Observe(keeping(d.o.SocketOf(h), want, frozen))
			if err != nil {
				return rep, fmt.Errorf("observe %s: %w", h.Ref(), err)
			}
			in = append(in, rotator.Input{Desired: want, Observed: obs})
		}
	}
	for _, p := range d.peerList() {
		if p.handle == nil {
			continue
		}
		want, _, err := d.desiredFor(snap, p, now)
		if err != nil {
			continue
		}
		defer zeroDesired(want)
		obs, err := rotator.Observe(d.o.SocketOf(p.handle))
		if err != nil {
			continue
		}
		in = append(in, rotator.Input{Desired: want, Observed: obs})
	}
	var buf bytes.Buffer
	if err := rotator.Render(&buf, rotator.PlanAll(in)); err != nil {
		return rep, err
	}
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if l != "" {
			rep.Plan = append(rep.Plan, l)
		}
	}
	pol := d.policy()
	for _, b := range pol.Bindings() {
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err == nil && !pk.NextChange.IsZero() {
			rep.Upcoming = append(rep.Upcoming, control.Event{Peer: b.Neighbor.String(), VRF: b.VRF, Chain: b.KeyChain, At: pk.NextChange, Action: "key set changes (lifetime boundary)"})
		}
	}
	return rep, nil
}

// Revoke implements control.Backend: the key leaves every listener and
// established socket at once. Where it is Current_key or RNext_key one
// forced TCP_AO_DEL_KEY names the best remaining key (atomic); where no
// other key exists the policy's on_revoke_only_key runs.
func (d *Daemon) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	start := time.Now()
	res := control.RevokeResult{Chain: req.Chain, Key: req.Key}
	snap := d.snapshot()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	defer snap.Zero()
	c := snap.Chains[req.Chain]
	var mkt *keystore.MKT
	if c != nil {
		for i := range c.Keys {
			if c.Keys[i].Name == req.Key {
				mkt = &c.Keys[i]
			}
		}
	}
	if mkt == nil {
		return res, fmt.Errorf("key %s/%s not in the key source: %w", req.Chain, req.Key, control.ErrNotFound)
	}
	var scope netip.Addr
	if req.Peer != "" {
		a, err := netip.ParseAddr(req.Peer)
		if err != nil {
			return res, fmt.Errorf("peer %q: %w", req.Peer, control.ErrInvalid)
		}
		scope = a
	}
	// Record first: a crash from here on must not re-install the key.
	if err := d.revoked.add(Revocation{Chain: req.Chain, Key: req.Key, At: d.o.Clock.Now()}); err != nil {
		return res, fmt.Errorf("recording the revocation: %w", err)
	}
	mkt.Revoked = true
	ids := [2]uint8{mkt.SendID, mkt.RecvID}
	var mu sync.Mutex
	add := func(s control.RevokeSocket) {
		mu.Lock()
		res.Sockets = append(res.Sockets, s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // listeners, by this goroutine alone
		defer wg.Done()
		d.revokeListeners(ctx, ids, scope, add)
	}()
	var ps []*peerState
	for _, p := range d.peerList() {
		if p.handle != nil && (!scope.IsValid() || p.info.Neighbor == scope) {
			ps = append(ps, p)
		}
	}
	sem := make(chan struct{}, 32)
	now := d.o.Clock.Now()
	for _, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			add(d.revokePeer(ctx, snap, p, ids, now))
		}()
	}
	if d.o.Source != nil {
		if err := d.o.Source.Revoke(ctx, req.Chain, req.Key); err != nil {
			res.SourceError = err.Error()
		} else {
			res.SourceRevoked = true
		}
	} else {
		res.SourceError = "the key source cannot be written"
	}
	wg.Wait()
	slices.SortFunc(res.Sockets, func(a, b control.RevokeSocket) int { return strings.Compare(a.Socket, b.Socket) })
	res.Elapsed = control.Duration(time.Since(start))
	if d.o.Metrics != nil {
		for _, s := range res.Sockets {
			d.o.Metrics.Revoked(s.Action)
		}
		d.o.Metrics.RevokeDone(time.Since(start))
	}
	d.log.Warn("key revoked", "chain", req.Chain, "key", req.Key, "sockets", len(res.Sockets), "elapsed", time.Since(start))
	d.Kick()
	return res, nil
}

func (d *Daemon) revokeListeners(ctx context.Context, ids [2]uint8, scope netip.Addr, add func(control.RevokeSocket)) {
	hs, err := d.tracker.Listeners(ctx)
	if err != nil {
		add(control.RevokeSocket{Socket: "listeners", Error: err.Error()})
		return
	}
	d.listenMu.Lock()
	defer d.listenMu.Unlock()
	for _, h := range hs {
		s := d.o.SocketOf(h)
		keys, err := s.Keys(tcpao.KeyFilter{})
		name := "listen " + h.Ref().Local.String()
		if err != nil {
			if !isNoAO(err) {
				add(control.RevokeSocket{Socket: name, Error: err.Error()})
			}
			continue
		}
		for _, k := range keys {
			if k.SendID != ids[0] || k.RecvID != ids[1] || (scope.IsValid() && !k.Peer.Contains(scope)) {
				continue
			}
			rs := control.RevokeSocket{Socket: name, Peer: k.Peer.String(), Action: control.ActionDeleted}
			if err := s.DelKey(tcpao.DelKey{KeyRef: k.KeyRef, Async: true}); err != nil {
				rs.Error = err.Error()
			}
			add(rs)
		}
	}
}

// revokePeer takes the key off one established session. The peer's rotator
// goroutine is held off meanwhile so that it stays the socket's only
// writer, and then resumes with the desired state without the key.
func (d *Daemon) revokePeer(ctx context.Context, snap *keystore.Snapshot, p *peerState, ids [2]uint8, now time.Time) control.RevokeSocket {
	id := PeerIDOf(p.info.Neighbor, p.info.VRF)
	rs := control.RevokeSocket{Socket: "peer " + string(id), Peer: p.info.Neighbor.String()}
	// The desired state without the revoked key: it picks the replacement
	// and then resumes the peer's rotation (the controller owns it then).
	want, pk, werr := d.desiredFor(snap, p, now)
	var pref *policy.DesiredKey
	if werr == nil {
		if k, ok := pk.PreferredKey(); ok {
			pref = &k
		}
		if d.ctrl.Exclusive(id, want, func(sock tcpao.Socket) { d.revokeOn(ctx, sock, p, ids, pref, &rs) }) {
			d.updatePeer(id, func(p *peerState) { p.desired = want })
			return rs
		}
	}
	// No rotation machine runs on the session (yet): stop any that
	// starts, revoke, then start it on the socket.
	sock := d.o.SocketOf(p.handle)
	d.ctrl.PeerDown(id)
	d.revokeOn(ctx, sock, p, ids, pref, &rs)
	if werr == nil {
		d.updatePeer(id, func(p *peerState) { p.desired = want })
		d.ctrl.SetDesired(id, want)
		if _, err := d.ctrl.Accepted(id, sock); err != nil {
			d.log.Warn("resuming the peer after revoke", "peer", id, "err", err)
		}
	}
	return rs
}

// revokeOn deletes the key with ids from sock, first moving Current_key
// and RNext_key to pref (or another key) when the key is one of them.
func (d *Daemon) revokeOn(ctx context.Context, sock tcpao.Socket, p *peerState, ids [2]uint8, pref *policy.DesiredKey, rs *control.RevokeSocket) {
	obs, err := rotator.Observe(sock)
	if err != nil {
		rs.Error = err.Error()
		return
	}
	var victim *tcpao.KeyInfo
	var others []tcpao.KeyInfo
	for i, k := range obs.Keys {
		if k.SendID == ids[0] && k.RecvID == ids[1] {
			victim = &obs.Keys[i]
		} else {
			others = append(others, k)
		}
	}
	if victim == nil {
		rs.Action = "absent"
		return
	}
	if len(others) == 0 {
		if p.binding.Safety.OnRevokeOnlyKey == policy.RevokeReset {
			rs.Action = control.ActionReset
			if err := d.o.Speaker.ResetPeer(ctx, p.info.Neighbor, "TCP-AO key revoked"); err != nil {
				rs.Error = err.Error()
			}
		} else {
			rs.Action = control.ActionKept
			rs.Error = "the revoked key is the session's only key and on_revoke_only_key is keep: traffic is still signed with it"
		}
		return
	}
	repl := others[0]
	if pref != nil {
		for _, k := range others {
			if k.SendID == pref.MKT.SendID && k.RecvID == pref.MKT.RecvID {
				repl = k
			}
		}
	}
	del := tcpao.DelKey{KeyRef: victim.KeyRef}
	if victim.IsCurrent || victim.IsRNext {
		del.SetCurrent, del.Current = true, repl.SendID
		del.SetRNext, del.RNext = true, repl.RecvID
		rs.Action, rs.Replacement = control.ActionForcedReplaced, fmt.Sprintf("send=%d recv=%d", repl.SendID, repl.RecvID)
	} else {
		rs.Action = control.ActionDeleted
	}
	if err := sock.DelKey(del); err != nil {
		rs.Error = err.Error()
	}
}

// observeMetrics publishes per-peer series, reading every session's kernel
// counters; it runs on each metrics scrape (metrics.OnCollect). Peers that
// are gone lost theirs when they went (forget).
func (d *Daemon) observeMetrics() {
	m := d.o.Metrics
	if m == nil {
		return
	}
	// The controller's status first: its goroutines take d.mu (through the
	// session guard) while they hold their own lock.
	sts := d.ctrl.Status()
	d.mu.Lock()
	m.SetOptmem(d.optmem[0], d.optmem[1])
	d.mu.Unlock()
	snap, release := d.shared()
	m.SetHeldBack(metricHolds(d.holds(snap)))
	release()
	for _, s := range sts {
		p := d.peer(s.Peer)
		if p == nil {
			continue
		}
		mp := metrics.Peer{Addr: p.info.Neighbor.String(), VRF: p.info.VRF}
		m.SetRotationState(mp, string(s.State))
		if p.handle == nil {
			continue
		}
		var cur, rn *uint8
		if s.Current.Valid {
			cur = &s.Current.ID
		}
		if s.RNext.Valid {
			rn = &s.RNext.ID
		}
		m.SetPeerKeys(mp, cur, rn, len(p.desired.Keys))
		d.countRolls(mp, s)
		if obs, err := rotator.Observe(d.o.SocketOf(p.handle)); err == nil {
			m.ObserveSocket(mp, "established", metrics.SocketCounters{PktGood: obs.Info.PktGood, PktBad: obs.Info.PktBad,
				PktKeyNotFound: obs.Info.PktKeyNotFound, PktAORequired: obs.Info.PktAORequired})
			kcs := make([]metrics.KeyCounters, 0, len(obs.Keys))
			for _, k := range obs.Keys {
				kcs = append(kcs, metrics.KeyCounters{Key: fmt.Sprintf("%d/%d", k.SendID, k.RecvID), SendID: k.SendID, RecvID: k.RecvID, PktGood: k.PktGood, PktBad: k.PktBad})
			}
			m.ObserveKeys(mp, kcs)
		}
	}
}

// countRolls turns the rotator's per-peer roll and abort counts into
// rotation started/completed/aborted counters, by the change since the last
// pass.
func (d *Daemon) countRolls(mp metrics.Peer, s rotator.Status) {
	m := d.o.Metrics
	d.mu.Lock()
	if d.rolls == nil {
		d.rolls = map[rotator.PeerID][2]int{}
	}
	last, seen := d.rolls[s.Peer]
	d.rolls[s.Peer] = [2]int{s.Rolls, s.Attempts}
	d.mu.Unlock()
	if !seen {
		return
	}
	for i := last[0]; i < s.Rolls; i++ {
		m.RotationStarted(mp)
		m.RotationCompleted(mp)
	}
	if s.Attempts > last[1] {
		reason := "switch-timeout"
		if strings.Contains(s.LastAbort, "session") || strings.Contains(s.LastAbort, "dropped") {
			reason = "session-down"
		} else if strings.Contains(s.LastAbort, "failed") {
			reason = "kernel-error"
		}
		for i := last[1]; i < s.Attempts; i++ {
			m.RotationStarted(mp)
			m.RotationAborted(mp, reason)
		}
	}
}

// forget drops a peer that left the speaker's configuration, with its
// metric series.
func (d *Daemon) forget(id rotator.PeerID) {
	d.log.Info("peer has no binding any more; forgotten", "peer", id)
	d.ctrl.Forget(id)
	d.mu.Lock()
	p := d.peers[id]
	delete(d.peers, id)
	delete(d.rolls, id)
	d.mu.Unlock()
	if p != nil && d.o.Metrics != nil {
		d.o.Metrics.DeletePeer(metrics.Peer{Addr: p.info.Neighbor.String(), VRF: p.info.VRF})
	}
}

func isNoAO(err error) bool {
	return errors.Is(err, errNoEnt)
}
