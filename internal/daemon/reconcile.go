package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ifIndex resolves a VRF name to its L3 master device's ifindex (0 for the
// default VRF).
func ifIndex(vrf string) (int, error) {
	if vrf == "" {
		return 0, nil
	}
	ifi, err := net.InterfaceByName(vrf)
	if err != nil {
		return 0, fmt.Errorf("vrf %q: %w", vrf, err)
	}
	return ifi.Index, nil
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// desiredFor turns the policy's answer for one established peer into the
// rotator's input. The keys carry shared copies of their secrets
// (desired.Socket), which Zero leaves to their other holders.
func (rc *reconciler) desiredFor(snap *keystore.Snapshot, p *peerState, now time.Time) (rotator.Desired, policy.PeerKeys, error) {
	id := p.info.Key()
	pk, err := rc.desiredOf(rc.policy(), snap, *p.info, now)
	if err != nil {
		return rotator.Desired{}, pk, err
	}
	if snap.Degraded(pk.SourceChain) {
		return rotator.Desired{}, pk, fmt.Errorf("peer %s, source chain %q: %w", id, pk.SourceChain, errFrozen)
	}
	idx, err := ifIndex(p.info.VRF)
	if err != nil {
		return rotator.Desired{}, pk, err
	}
	pref := rc.early.prefer(id, pk) // the schedule's key, or the one aoctl rotate named
	prefix := sessionPrefix(pk.Binding, p.info.Neighbor.WithZone(""))
	if mp, ok := rc.migrs.migrationPrefix(pk.Binding); ok {
		prefix = mp // the listener's keys for a migrating peer, copied as they are
	}
	out := desired.Socket(pk, snap, prefix, idx, pref, rotator.SocketID("peer "+id.String()), rotator.Established)
	out.Replace = rc.owns.approvedRefs(pk, prefix, idx)
	if p.handle != nil {
		out.Owner = rc.owns.owner(p.handle.Ref().PID)
	}
	return out, pk, nil
}

// peerDesired is the policy's answer for one peer with the revocations
// scoped to that peer applied.
func (rc *reconciler) peerDesired(pol *policy.Policy, snap *keystore.Snapshot, addr netip.Addr, vrf string, now time.Time) (policy.PeerKeys, error) {
	pk, err := pol.Desired(snap, addr, vrf, now)
	if err == nil {
		rc.revs.Scope(&pk, peer.KeyOf(addr, vrf))
	}
	return pk, err
}

// sessionPrefix is the peer prefix of an established session's keys: the
// binding's, as on the listener, which the kernel copies to the accepted
// socket as they are (a /64 binding's session carries /64 keys). A key
// the session already holds for another prefix covering the peer (an
// active open's host keys) is the same key to the planner, which compares
// an established socket's keys by IDs.
func sessionPrefix(b policy.Binding, peer netip.Addr) netip.Prefix {
	if b.Neighbor.IsValid() && b.Neighbor.Contains(peer) {
		return b.Neighbor.Masked()
	}
	return hostPrefix(peer)
}

// listenerDesired is the key set of the speaker's listening sockets: every
// binding's desired keys, for the binding's neighbor address or prefix
// (and, into md5 when not nil, its TCP-MD5 part: addMD5Binding);
// incomplete when a binding's keys could not be computed. frozen are the
// bindings whose installed keys must stay: their keys could not be
// computed, or their chain is degraded in the key source (see lossy.go).
func (rc *reconciler) listenerDesired(snap *keystore.Snapshot, now time.Time, md5 *md5Want) (v4, v6 rotator.Desired, next time.Time, incomplete bool, frozen []frozenRange) {
	v4 = rotator.Desired{Kind: rotator.Listening}
	v6 = rotator.Desired{Kind: rotator.Listening}
	pol := rc.policy()
	for _, b := range pol.Bindings() {
		// A migrating peer's keys sit at its migration's prefix: that is
		// what a freeze keeps.
		prefix, migrating := rc.migrs.migrationPrefix(b)
		fb := b
		fb.Neighbor = prefix
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err == nil && b.Neighbor.IsSingleIP() {
			// A peer-scoped revocation covers the peer's own listener
			// entry, not a prefix binding's, which other peers share.
			rc.revs.Scope(&pk, peer.KeyOf(b.Neighbor.Addr(), b.VRF))
		}
		if md5 != nil {
			rc.addMD5Binding(md5, b, pk, err)
		}
		if err != nil {
			rc.log.Warn("no desired keys for binding", "binding", b.String(), "err", err)
			incomplete = true
			frozen = freeze(frozen, fb, err)
			continue
		}
		if snap.Degraded(pk.SourceChain) {
			frozen = freeze(frozen, fb, errFrozen)
		}
		next = sooner(next, pk.NextChange)
		idx, err := ifIndex(b.VRF)
		if err != nil {
			rc.log.Warn("binding's VRF not found", "binding", b.String(), "err", err)
			incomplete = true
			frozen = freeze(frozen, fb, err)
			continue
		}
		dst := &v6
		if b.Neighbor.Addr().Is4() {
			dst = &v4
		}
		one := desired.Socket(pk, snap, prefix, idx, -1, "", rotator.Listening)
		if md5Peer(pk) && !migrating {
			// A TCP-MD5 peer: its password goes on the listener
			// (addMD5Binding), none of its chain's TCP-AO keys.
			for _, k := range one.Keys {
				k.Secret.Zero()
			}
			one.Keys = nil
		}
		dst.Keys = append(dst.Keys, one.Keys...)
		dst.Revoked = append(dst.Revoked, one.Revoked...)
		dst.Replace = append(dst.Replace, rc.owns.approvedRefs(pk, prefix, idx)...)
	}
	if pol.HasLinkBindings() && rc.tracker != nil {
		lnext, lincomplete, lfrozen, warnings := rc.linkListenerDesired(pol, snap, now, rc.tracker.LinkPeers(), &v4, &v6)
		next, incomplete, frozen = sooner(next, lnext), incomplete || lincomplete, append(frozen, lfrozen...)
		rc.links.set(warnings)
	} else {
		rc.links.set(nil)
	}
	return v4, v6, next, incomplete, frozen
}

// revokeHold is when a pass held by a revoke under way looks again (the
// revoke's end asks for one at once).
const revokeHold = 100 * time.Millisecond

// passInputs are what desired state is computed from, besides the clock:
// while they stay the same and no policy time boundary is reached, every
// peer's and listener's desired state stays the same.
type passInputs struct {
	keys    uint64 // keystore.Cache generation
	migr    uint64 // migrate.Store generation
	revoked int    // recorded revocations
	pol     *policy.Policy
	events  uint64 // reconciler.events
	early   uint64 // aoctl rotate's requests (earlyRolls generation)
}

func (rc *reconciler) inputs() passInputs {
	return passInputs{keys: rc.o.Keys.Generation(), migr: rc.migrs.Generation(), revoked: rc.revs.Count(), pol: rc.policy(), events: rc.events.Load(),
		early: rc.early.generation()}
}

// reconcile is one pass. It returns when the next pass is due (zero: no
// time boundary, a full pass within Resync).
//
// A pass whose inputs did not change since the last full pass, before a
// policy time boundary and before a full pass is due, is idle: it returns
// at once, reading neither the policy nor the kernel. Otherwise it is full:
// listeners are synchronised against the kernel (this goroutine is their
// only writer) and, when an input changed, every established peer gets
// its new desired state (its own goroutine acts on it).
func (rc *reconciler) reconcile(ctx context.Context) time.Time {
	rc.early.flush() // the early rolls held or ended since the last pass
	now := time.Now()
	migrNext := rc.migrs.advanceMigrations(ctx, now) // a step taken changes the inputs
	if rc.revoking.Load() > 0 {
		// A revoke is under way: it gave every peer it covers its
		// desired state itself, and a full pass (every peer's desired
		// state, the listeners read and planned) took the CPU the revoke
		// needs: 0.5 of a 1,024-peer revoke's 4.4 CPU-seconds in the
		// guest. Nothing leaves a socket by a deferred pass; the revoke
		// asks for a full one as it ends, and the revocation's record
		// changed the inputs, so the next pass is full.
		return sooner(now.Add(revokeHold), migrNext)
	}
	in, sessions := rc.inputs(), rc.sessions.Load()
	rc.mu.Lock()
	boundary := rc.nextPass
	rc.mu.Unlock()
	changed := !rc.haveLast || in != rc.last || (!boundary.IsZero() && !now.Before(boundary))
	if !changed && now.Before(rc.lastFull.Add(rc.o.Resync)) {
		if sessions == rc.lastSessions {
			rc.idlePasses.Add(1)
			return sooner(rc.due(boundary), migrNext)
		}
		if at := rc.lastFull.Add(pace(rc.lastCost)); now.Before(at) {
			// Only session events asked for this pass: it waits its turn.
			rc.idlePasses.Add(1)
			return sooner(at, sooner(rc.due(boundary), migrNext))
		}
	}
	if rc.log.Enabled(ctx, slog.LevelDebug) {
		rc.log.Debug("full reconcile pass", "first", !rc.haveLast, "keys", in.keys != rc.last.keys,
			"revoked", in.revoked != rc.last.revoked, "policy", in.pol != rc.last.pol, "events", in.events != rc.last.events,
			"early", in.early != rc.last.early, "boundary", !boundary.IsZero() && !now.Before(boundary), "retry", rc.retry,
			"sessions", sessions != rc.lastSessions, "drift_check", !changed)
	}
	// Desired state that could not be computed last time (a VRF device
	// not there yet, ...) is retried with each full pass.
	changed = changed || rc.retry
	rc.retry = false
	snap, release := rc.shared()
	defer release()
	if snap == nil {
		rc.log.Warn("no good key snapshot yet: touching nothing", "source", rc.o.Keys.Status().Source)
		return time.Time{}
	}
	next := boundary
	if rc.migrs.recoverMigrations(snap, now) {
		changed = true // a migration recorded: every desired state follows it
	}
	if changed { // always on the first pass
		next = rc.listenerWant(snap, now)
	}
	rc.dropStale(ctx)
	// The sessions get their desired state first, the listeners after: a
	// machine's roll starts at once on its own goroutine, and a listener
	// with thousands of keys (256 writes at a fleet-wide key change) holds
	// up no session's. Each peer gets its state as soon as it is computed,
	// so its machine's roll overlaps the rest of this loop (no wave of
	// machines woken at once at the end; docs/performance.md).
	for _, p := range rc.table.peerList() {
		id := p.id
		if !rc.managed(*p.info) {
			rc.forget(id) // its binding left the policy
			continue
		}
		if p.handle == nil {
			continue
		}
		if !rc.ctrl.Runs(id, p.handle) {
			// A session reported before the first good key read, or
			// whose take-over failed: take it over now.
			rc.table.takeOver(snap, id)
			continue
		}
		rc.early.observeEarly(id) // before its desired state: an early roll may end
		if !changed {
			continue // the same inputs give the same desired state
		}
		desired, pk, err := rc.desiredFor(snap, p, now)
		if err != nil {
			rc.log.Warn("no desired keys for peer", "peer", id, "err", err)
			rc.retry = true
			continue
		}
		if r, why := rc.early.stale(id, pk, now); why != "" {
			rc.log.Info("aoctl rotate's early roll ends; the schedule governs", "peer", id, "key", r.label(), "why", why)
		}
		if !rc.ctrl.SetDesired(id, desired) {
			zeroDesired(desired) // the controller keeps the equal one it has
		}
		next = sooner(next, pk.NextChange)
	}
	if changed {
		rc.early.endUnbound()
	}
	rc.early.flush() // before the listeners: the ends this pass found
	next = sooner(next, rc.early.deadline(now, rc.ctrl.Config().SwitchTimeout))
	rc.stat.noteFirstContact(ctx) // before the sync installs a new peer's keys
	rc.syncListeners(ctx, rc.takeAsks()...)
	rc.last, rc.lastSessions, rc.haveLast, rc.lastFull = in, sessions, true, now
	rc.lastCost = time.Since(now)
	rc.mu.Lock()
	rc.nextPass = next
	rc.mu.Unlock()
	rc.fullPasses.Add(1)
	// A migration's next instant wakes a pass, not a full one: the pass
	// moves it first (advanceMigrations), and a step taken changes the
	// inputs, which makes that pass full.
	return sooner(rc.due(next), migrNext)
}

// Session events (a session taken over, up or down, a roll done) ask for
// a full pass without recompute: the listeners re-read, and keys no
// session carries any more retired from them. In a fleet-wide roll they
// come one per peer, and each pass reads and plans every listener key (a
// 1,024-peer roll on the guest: 44 passes back to back, 60-700 ms each,
// a third of aokeyd's CPU over the roll). Such a pass starts no sooner
// than paceFactor times the last full pass's duration after that pass
// started, at most maxPace: the reconcile goroutine spends at most an
// eighth of its time on them, and a listener key waits at most maxPace
// longer to be retired (never-strand holds either way: a pass that does
// not run deletes nothing). A pass any other input asks for (a key, the
// policy, a revoke, a time boundary, a resync due) is never paced.
const (
	paceFactor = 8
	maxPace    = time.Second
)

// pace is how long after a full pass that took cost the next pass asked
// for by session events alone may start.
func pace(cost time.Duration) time.Duration {
	return min(maxPace, paceFactor*max(cost, 0))
}

// sooner is the earlier of two instants, the zero time standing for none.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// due is when the next pass must run: the policy's next time boundary or
// the next full pass, whichever is first.
func (rc *reconciler) due(boundary time.Time) time.Time {
	return sooner(boundary, rc.lastFull.Add(rc.o.Resync))
}

// listenerWant recomputes the listeners' desired keys into the cache the
// full passes sync against, and returns the first policy time boundary.
func (rc *reconciler) listenerWant(snap *keystore.Snapshot, now time.Time) time.Time {
	md5 := newMD5Want()
	v4, v6, next, incomplete, frozen := rc.listenerDesired(snap, now, &md5)
	rc.retry = rc.retry || incomplete || len(frozen) > 0
	rc.logFrozen(frozen)
	rc.dropListenerWant()
	rc.want, rc.frozen = listenerWant{fitKeys(v4), fitKeys(v6)}, frozen
	rc.md5 = md5
	rc.md5Ever = rc.md5Ever || len(rc.md5.v4.Keys)+len(rc.md5.v6.Keys)+len(rc.md5.v4.Retire)+len(rc.md5.v6.Retire) > 0
	return next
}

// dropListenerWant zeroes the cached listener keys.
func (rc *reconciler) dropListenerWant() {
	zeroDesired(rc.want.v4, rc.want.v6)
	rc.md5.zero()
	rc.want, rc.frozen, rc.md5 = listenerWant{}, nil, md5Want{}
}

// syncListeners brings the speaker's listening sockets, and the sockets
// of asks (held in listen(2): listen.go), to the cached desired keys,
// reading each one's keys from the kernel first, and answers each ask it
// claims. The held sockets are synced after the listed ones, each as the
// listener it becomes. When the listeners cannot be listed (gobgpd's pid
// is found by its listener: none yet) the held sockets are synced alone,
// and what status shows of the last sync stays as it was.
func (rc *reconciler) syncListeners(ctx context.Context, asks ...*listenAsk) {
	v4, v6 := rc.want.v4, rc.want.v6
	asks = claimAsks(asks)
	defer func() {
		for _, a := range asks {
			a.answer(errors.New("the listener sync ended before it keyed the socket")) // a no-op once answered
		}
	}()
	hs, err := rc.tracker.Listeners(ctx)
	if f, ok := mptcpFault(err, sockets.Ref{}); ok {
		rc.noteListenerFaults([]control.ListenerFault{f})
	} else if err != nil {
		rc.log.Warn("speaker's listening sockets not found; will retry", "err", err)
	}
	whole := err == nil // every listener listed: the sync status shows
	if !whole {
		if len(asks) == 0 {
			return
		}
		hs = nil
	}
	listed := len(hs)
	for _, a := range asks {
		hs = append(hs, a.h)
	}
	if len(hs) > 0 {
		// The listener watch lists the listeners in this process's
		// namespace from now on (lwatch.go).
		rc.lwatch.found(hs[0].Ref().PID)
	}
	var faults []control.ListenerFault
	defer func() {
		if whole {
			rc.noteListenerFaults(faults)
		}
	}()
	have4 := slices.ContainsFunc(hs, func(h bgp.SocketHandle) bool { return h.Ref().Local.Addr().Unmap().Is4() })
	// The keys the sessions carry, and those peers that are down last
	// authenticated with: the planner keeps every listener key they name.
	// They are recorded before anything is applied (carried.go); until
	// every session up has been read since the start, or when the record
	// cannot be written, no listener key is deleted at all.
	ch0 := rc.keyChanges.Load() // before what the sessions carry is read
	carried, hold := rc.carriedNow()
	// An edit in place of a listener key whose peer is down and fails
	// against it takes effect (rotator.EditPeerDown): the watch of such
	// keys needs every key the sessions up carry, all of them read, and
	// is left alone by a sync that lacks them.
	var down *rotator.DownWatch
	var up []tcpao.KeyRef
	if !hold {
		var complete bool
		if up, complete = rc.carriedUp(); complete {
			down = &rc.down
		}
	}
	needed, most := 0, 0
	wants := make([]rotator.Desired, len(hs))
	for i, h := range hs {
		want := listenerWantOf(h.Ref(), v4, v6, have4)
		want.Frozen = frozenKeys(rc.frozen)
		if hold {
			want.Frozen = append(want.Frozen, holdAll...)
		}
		want.Owner = rc.owns.owner(h.Ref().PID)
		n := 0
		for _, k := range want.Keys {
			n += tcpao.KeyOptMem(k.Algorithm)
		}
		needed += n
		most = max(most, n)
		wants[i] = want
	}
	optMemMax := rc.o.OptMemMax
	if rc.o.RaiseOptMem != nil && len(hs) > 0 {
		// optmem_max is per socket and per network namespace: the
		// listener with the most keys, in the speaker's namespace.
		if limit, ok := rc.raiseOptMem(hs[0].Ref().PID, most); ok {
			optMemMax = func() (int, error) { return limit, nil }
		}
	}
	var kept []rotator.Held
	var edits []rotator.Edit
	var md5Held []rotator.MD5Held
	defer func() {
		if !whole {
			return
		}
		rc.mu.Lock()
		rc.md5Held = md5Held
		rc.mu.Unlock()
	}()
	for i, h := range hs {
		ref, want := h.Ref(), wants[i]
		var ask *listenAsk // a socket held in listen(2)
		if i >= listed {
			ask = asks[i-listed]
			if why := missingOn(rc.frozen, ref, have4); why != "" {
				ask.answer(fmt.Errorf("keys that belong on the listener could not be computed (%s): it would take those peers' unsigned SYNs", why))
				continue
			}
		}
		start := time.Now()
		// TCP-MD5 first: the kernel refuses an MD5 key inside a TCP-AO
		// prefix already on the socket (a migration's covering prefix
		// holds the peer's host address and, on a dense LAN, its
		// neighbours'), while the TCP-AO prefix is taken beside MD5 keys
		// inside it. A new listener keyed in the other order would
		// refuse every covered peer's password. A password held back
		// for TCP-AO over its peer is tried again after the TCP-AO
		// sync, which may have taken that key away (a peer moved from
		// TCP-AO back to TCP-MD5).
		var md5Err error
		var md5HeldHere []rotator.MD5Held
		if rc.md5Ever { // nothing to read before a binding had a password
			md5HeldHere, md5Err = rc.syncMD5(h, md5WantOf(ref, rc.md5, have4))
		}
		// A socket that does not listen yet refuses del_async (EINVAL).
		sp, err := rotator.SyncListener(rc.listenerSocket(h), want, rotator.ListenerOptions{OptMemMax: optMemMax, Carried: carried,
			SyncDeletes: rc.syncListenerDeletes() || ask != nil, Down: down, Up: up})
		kept = append(kept, sp.Kept...)
		for _, h := range sp.Blocked {
			if h.Why == rotator.ReasonForeignClash {
				kept = append(kept, h) // shown and counted as kept keys are
			}
		}
		if err != nil {
			md5Held = append(md5Held, md5HeldHere...)
		}
		if f, ok := mptcpFault(err, ref); ok && ask == nil {
			faults = append(faults, f)
			continue
		}
		if err != nil {
			rc.log.Error("listener sync failed", "socket", ref.String(), "err", err)
			// What it held is held; what it would have applied is not done.
			edits = append(edits, slices.DeleteFunc(slices.Clone(sp.Edits), func(e rotator.Edit) bool { return e.Rule.Applied() })...)
			if ask != nil {
				ask.answer(err)
			}
			continue
		}
		edits = append(edits, sp.Edits...)
		if slices.ContainsFunc(md5HeldHere, func(x rotator.MD5Held) bool { return x.Why == rotator.ReasonAOCovers }) {
			md5HeldHere, md5Err = rc.syncMD5(h, md5WantOf(ref, rc.md5, have4))
		}
		md5Held = append(md5Held, md5HeldHere...)
		switch {
		case ask != nil:
			if md5Err == nil {
				rc.log.Info("listener keyed in its listen(), before it takes a SYN", "socket", ref.String(), "ops", len(sp.Ops),
					"took", time.Since(start).Round(time.Millisecond))
			}
			ask.answer(md5Err)
		case len(sp.Ops) > 0:
			rc.log.Info("listener synchronised", "socket", ref.String(), "ops", len(sp.Ops), "took", time.Since(start).Round(time.Millisecond))
		}
		for _, h := range sp.Blocked {
			rc.log.Warn("listener change blocked", "socket", ref.String(), "key", h.Ref.String(), "reason", h.Why.String(), "detail", h.Detail)
		}
	}
	if !whole {
		return // what status shows stays the last whole sync's
	}
	rc.noteListenerKept(kept)
	rc.carriedChangedDuring(ch0)
	rc.noteListenerEdits(edits)
	socks := make(map[rotator.SocketID]bool, len(wants))
	for _, w := range wants {
		socks[w.Socket] = true
	}
	rc.down.Forget(socks)
	limit, _ := optMemMax()
	rc.mu.Lock()
	rc.optmem = optMemUse{limit, needed}
	rc.mu.Unlock()
}

// listenerWantOf is the desired state of one listening socket: the
// bindings' keys of its address family (a dual-stack listener, when the
// speaker has no IPv4 one, takes the IPv4 peers too), and of a listener
// bound to a device (a speaker's per-VRF listener) only the keys of that
// VRF: a VRF's keys never reach another VRF's listener, nor the sessions
// the kernel copies its keys to. An unbound listener takes every key, as
// with net.ipv4.tcp_l3mdev_accept it accepts the VRFs' connections too.
// The slices are fresh: the planner may reorder them.
func listenerWantOf(ref sockets.Ref, v4, v6 rotator.Desired, have4 bool) rotator.Desired {
	var want rotator.Desired
	switch {
	case ref.Local.Addr().Unmap().Is4():
		want = v4
	case have4:
		want = v6
	default:
		want = v6
		want.Keys = append(slices.Clip(v6.Keys), v4.Keys...)
		want.Revoked = append(slices.Clip(v6.Revoked), v4.Revoked...)
		want.Replace = append(slices.Clip(v6.Replace), v4.Replace...)
	}
	dev := func(r tcpao.KeyRef) bool { return ref.BoundDev != 0 && r.IfIndex != ref.BoundDev }
	want.Keys = slices.DeleteFunc(slices.Clone(want.Keys), func(k rotator.DesiredKey) bool { return dev(k.KeyRef) })
	want.Revoked = slices.DeleteFunc(slices.Clone(want.Revoked), func(r rotator.RevokedKey) bool { return dev(r.KeyRef) })
	want.Replace = slices.DeleteFunc(slices.Clone(want.Replace), dev)
	want.Socket = rotator.SocketID("listen " + ref.Local.String())
	if ref.BoundDev != 0 {
		want.Socket += rotator.SocketID(fmt.Sprintf(" dev %d", ref.BoundDev))
	}
	return want
}

// dropStale stops touching sessions of a speaker process that is gone (a
// restarted gobgpd): their handles name the old pid. The tracker hands the
// new process's sessions over as it sees them.
func (rc *reconciler) dropStale(ctx context.Context) {
	pid, err := rc.o.Speaker.PID(ctx)
	if err != nil {
		return
	}
	var stale []bgp.PeerInfo
	for _, p := range rc.table.peerList() {
		if p.handle != nil && p.handle.Ref().PID != pid {
			stale = append(stale, *p.info)
		}
	}
	for _, info := range stale {
		rc.log.Info("speaker process changed; dropping the old session's socket", "peer", info.Key(), "pid", pid)
		rc.table.OnDown(ctx, info)
	}
}
