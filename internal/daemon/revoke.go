package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/runstack"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// revocations is the revocation service: aoctl revoke and the fleet's
// revocations (request, fleet), recorded in its store before anything is
// applied, then taken off each session through its machine and off the
// listeners through the reconciler (askListenerRevoke). It alone writes
// the store (Add); the passes read it through Apply, Scope and Count.
type revocations struct {
	*core
	store *revocation.Store // recorded revocations
}

// Apply removes the recorded revocations from s.
func (rv *revocations) Apply(s *keystore.Snapshot) { rv.store.Apply(s) }

// Scope applies the revocations scoped to the peer to pk.
func (rv *revocations) Scope(pk *policy.PeerKeys, id rotator.PeerID) { rv.store.Scope(pk, id) }

// Count is how many revocations are recorded (a pass input).
func (rv *revocations) Count() int { return rv.store.Count() }

// Warning is what status warns of the record ("" when nothing).
func (rv *revocations) Warning() string { return rv.store.Warning() }

// request is Daemon.Revoke (control.Backend): the key leaves every listener and
// established socket at once (or, scoped to a peer, that peer's session
// and its own listener entries). Where it is Current_key or RNext_key one
// forced TCP_AO_DEL_KEY names the best remaining key (atomic); where no
// other key exists the policy's on_revoke_only_key runs. The revocation is
// recorded durably before any socket is touched: a revoke that cannot be
// recorded fails and changes nothing (not even after a restart); one that
// is recorded but whose record is left degraded (its backup behind) is
// done, with RecordError saying so. Only a global revoke is written back
// to the key source, which every peer shares.
func (rv *revocations) request(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	return rv.revoke(ctx, req, true)
}

// fleet applies a fleet revocation (read from the fleet record in
// Vault): as a global Revoke, recorded durably and taken off every socket
// at once, but the key source is not written: the fleet record is the
// fleet's, and a router's token may only read. An unknown key is
// control.ErrNotFound.
func (rv *revocations) fleet(ctx context.Context, chain, key string) (control.RevokeResult, error) {
	return rv.revoke(ctx, control.RevokeRequest{Chain: chain, Key: key}, false)
}

func (rv *revocations) revoke(ctx context.Context, req control.RevokeRequest, writeBack bool) (control.RevokeResult, error) {
	start := time.Now()
	// No full pass runs until the revoke ends (reconcile, execPass); from
	// before the record, whose change would start one.
	held := rv.recon.revokeUnderWay()
	defer held()
	res := control.RevokeResult{Chain: req.Chain, Key: req.Key, Peer: req.Peer, VRF: req.VRF}
	snap := rv.snapshot()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	defer snap.Zero()
	mkt, rec, scope, err := rv.revokeTarget(snap, req)
	if err != nil {
		return res, err
	}
	if !rec.Global() {
		res.Peer = rec.Peer.Name()
	}
	// Record first: a crash from here on must not re-install the key, and
	// a revocation that cannot be recorded must not be applied.
	inForce, err := rv.store.Add(rec)
	if !inForce {
		return res, fmt.Errorf("recording the revocation (nothing was revoked): %w", err)
	}
	if err != nil {
		// Recorded, so in force (and after a restart): revoke it now too,
		// and say what is amiss with the record.
		res.RecordError = err.Error()
		rv.log.Error("REVOCATION RECORDED, BUT ITS RECORD IS DEGRADED: revoking the key anyway", "chain", req.Chain, "key", req.Key, "err", err)
	}
	if rec.Global() {
		mkt.Revoked = true
	}
	rk := revokedKey{ids: [2]uint8{mkt.SendID, mkt.RecvID}, fp: mkt.Secret.Fingerprint(),
		known: tcpao.NewKnown([]tcpao.KnownKey{{SendID: mkt.SendID, RecvID: mkt.RecvID, Secret: mkt.Secret}})}
	var mu sync.Mutex
	add := func(s control.RevokeSocket) {
		mu.Lock()
		res.Sockets = append(res.Sockets, s)
		mu.Unlock()
	}
	wait := rv.revokeSockets(ctx, snap, req.Chain, rk, scope, add)
	switch {
	case !rec.Global():
		// The source is shared by every peer: a peer-scoped revoke lives
		// in aokeyd's record only.
	case !writeBack:
		// A fleet revocation: the fleet record in Vault holds it.
	case rv.o.Source != nil:
		if err := rv.o.Source.Revoke(ctx, req.Chain, req.Key); err != nil {
			res.SourceError = err.Error()
		} else {
			res.SourceRevoked = true
		}
	default:
		res.SourceError = "the key source cannot be written"
	}
	wait()
	slices.SortFunc(res.Sockets, func(a, b control.RevokeSocket) int { return strings.Compare(a.Socket, b.Socket) })
	res.Elapsed = control.Duration(time.Since(start))
	if rv.o.Metrics != nil {
		for _, s := range res.Sockets {
			rv.o.Metrics.Revoked(string(s.Action))
		}
		rv.o.Metrics.RevokeDone(time.Since(start))
	}
	rv.log.Warn("key revoked", "chain", req.Chain, "key", req.Key, "peer", res.Peer, "vrf", req.VRF,
		"sockets", len(res.Sockets), "elapsed", time.Since(start))
	held()
	rv.recon.askFull()
	return res, nil
}

// revokeTarget finds the MKT req names in snap and the revocation to
// record: global, or scoped to the peer (an address of a known peer) and
// VRF req names.
func (rv *revocations) revokeTarget(snap *keystore.Snapshot, req control.RevokeRequest) (*keystore.MKT, revocation.Revocation, scopedPeer, error) {
	rec := revocation.Revocation{Chain: req.Chain, Key: req.Key, At: time.Now()}
	var mkt *keystore.MKT
	if c := snap.Chains[req.Chain]; c != nil {
		for i := range c.Keys {
			if c.Keys[i].Name == req.Key {
				mkt = &c.Keys[i]
			}
		}
	}
	if mkt == nil {
		return nil, rec, scopedPeer{}, fmt.Errorf("key %s/%s not in the key source: %w", req.Chain, req.Key, control.ErrNotFound)
	}
	var scope scopedPeer
	if req.Peer != "" {
		s, err := rv.revokeScope(req)
		if err != nil {
			return nil, rec, scopedPeer{}, err
		}
		scope, rec.Peer = s, s.key
	} else if req.VRF != "" {
		return nil, rec, scopedPeer{}, fmt.Errorf("vrf %q without a peer: a VRF scopes a peer-scoped revoke: %w", req.VRF, control.ErrInvalid)
	}
	return mkt, rec, scope, nil
}

// revokedKey is the key a revoke takes off the sockets: its IDs and the
// fingerprint of its material. The kernel knows a key by its IDs, but a
// key under the same IDs with other material is another key (an
// operator's own, another chain's): the revoke deletes only a key with
// both, and warns of the other (otherMaterial).
type revokedKey struct {
	ids [2]uint8
	fp  tcpao.Fingerprint
	// known is the revoked key's secret, for the revoke's reads
	// (revokedKey.filter). It shares the revoke's snapshot's bytes: it is
	// used only until the revoke's sockets are done, before the snapshot
	// is zeroed.
	known *tcpao.Known
}

// filter is the revoke's read of a socket: the keys under the revoked
// IDs alone fingerprinted, and one holding the revoked secret
// fingerprinted from it, without an HMAC (tcpao.Known: the answer is the
// one an HMAC gives). Under QEMU's emulation the HMACs were 0.3 of a
// 1,024-peer revoke's 4.4 CPU-seconds, one a session and one a listener
// entry.
func (r *revokedKey) filter() tcpao.KeyFilter {
	return tcpao.KeyFilter{FingerprintIDs: &r.ids, Known: r.known}
}

// is reports whether k is under the revoked key's IDs, and same whether
// its material is the revoked key's too (k read with its fingerprint).
func (r revokedKey) is(k tcpao.KeyInfo) (ids, same bool) {
	ids = k.SendID == r.ids[0] && k.RecvID == r.ids[1]
	return ids, ids && k.Fingerprint == r.fp
}

// otherMaterial reports k, a key under the revoked key's IDs whose
// material is not the revoked key's, as kept: in the outcome (absent: the
// revoked key is not there) and in the log, naming the socket, peer and
// IDs (never the material).
func (rv *revocations) otherMaterial(rs *control.RevokeSocket, k tcpao.KeyInfo) {
	rs.Action = control.ActionAbsent
	rs.Warning = fmt.Sprintf("the key send=%d recv=%d for %s has other material than the revoked key: not the revoked key, kept (remove it by hand if it must go)", k.SendID, k.RecvID, k.Peer)
	rv.log.Warn("revoke: a key under the revoked key's IDs has other material: kept", "socket", rs.Socket, "peer", k.Peer,
		"send_id", k.SendID, "recv_id", k.RecvID)
}

// revokeSockets deletes the revoked key rk from the listeners (one
// goroutine) and from every session in scope (every session bound to the
// key's chain when scope is invalid; up to revokeParallel at a time), reporting each
// socket to add. The returned function waits until all are done.
//
// The kernel knows a key by its IDs only, and another chain may hold a key
// of its own with the same IDs: only the listener entries and sessions of
// bindings that read chain are touched, and on them only a key with the
// revoked key's material too.
func (rv *revocations) revokeSockets(ctx context.Context, snap *keystore.Snapshot, chain string, rk revokedKey, scope scopedPeer, add func(control.RevokeSocket)) (wait func()) {
	if rv.o.Executor != nil {
		return rv.execRevoke(ctx, chain, rk, scope, add)
	}
	pol := rv.policy()
	var wg sync.WaitGroup
	if !mutantRevokeSkipsListener {
		wg.Add(1)
		go func() { // listeners, by their owner, the reconcile goroutine
			defer wg.Done()
			rv.recon.askListenerRevoke(ctx, &listenerRevoke{ctx: ctx, inChain: chainEntries(pol, chain), chain: chain, key: rk, scope: scope.addr, vrf: scope.key.VRF, add: add})
		}()
	}
	var ps []*peerState
	for _, p := range rv.table.peerList() {
		if p.handle == nil {
			continue
		}
		if scope.IsValid() && p.info.Key() != scope.key {
			continue
		}
		if !readsChain(pol, p.info.Key(), chain) {
			continue
		}
		ps = append(ps, p)
	}
	release := func() {}
	if rv.o.Expedite != nil && len(ps) > 0 {
		release = rv.o.Expedite()
	}
	// revokeParallel workers, each on a stack grown once: a goroutine a
	// peer grew its starting stack on each one's deep path (the desired
	// state's computation, the borrow), a copy of every frame each time.
	work := make(chan *peerState)
	now := time.Now()
	for range min(revokeParallel, len(ps)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runstack.Grow()
			for p := range work {
				add(rv.revokePeer(ctx, snap, p, rk, now))
			}
		}()
	}
	for _, p := range ps {
		work <- p
	}
	close(work)
	return func() {
		wg.Wait()
		release()
	}
}

// revokeParallel bounds the sessions a revoke works on at once. Each
// forced delete waits in the kernel for an RCU grace period (synchronize_rcu)
// with the CPU idle: concurrent ones share
// grace periods, so the bound is what overlaps them; the CPU work per
// session is one borrow of its descriptor.
const revokeParallel = 64

// readsChain reports whether the binding of the peer k reads the key
// source's chain.
func readsChain(pol *policy.Policy, k peer.Key, chain string) bool {
	b, err := pol.BindingForKey(k)
	if err != nil {
		return false
	}
	kc, ok := pol.Chain(b.KeyChain)
	return ok && kc.SourceChain == chain
}

// listenerEntry is one binding's place on a listening socket: its prefix
// on its VRF's device (ifindex 0: the default VRF).
type listenerEntry struct {
	peer    netip.Prefix
	ifIndex int
}

// chainEntries lists the listener entries of the bindings that read the
// key source's chain. A binding whose VRF device is missing has no entry.
func chainEntries(pol *policy.Policy, chain string) map[listenerEntry]bool {
	out := map[listenerEntry]bool{}
	for _, b := range pol.Bindings() {
		kc, ok := pol.Chain(b.KeyChain)
		if !ok || kc.SourceChain != chain {
			continue
		}
		idx, err := ifIndex(b.VRF)
		if err != nil {
			continue
		}
		out[listenerEntry{b.Neighbor, idx}] = true
	}
	return out
}

// scopedPeer is a peer-scoped revoke's peer: its key, and the address its
// listener entry is keyed for (its own; an interface neighbour's learned
// address, invalid before one: no entry).
type scopedPeer struct {
	key  peer.Key
	addr netip.Addr
}

// IsValid reports whether the revoke is scoped to a peer.
func (s scopedPeer) IsValid() bool { return s.key.IsValid() }

// revokeScope checks a peer-scoped revoke's peer: an address some binding
// of the policy covers, or an interface neighbour's interface (aoctl
// revoke --peer swp1) a neighbor_interface binding binds, with the key's
// chain.
func (rv *revocations) revokeScope(req control.RevokeRequest) (scopedPeer, error) {
	pol := rv.policy()
	k, err := peer.ParseArg(req.Peer)
	switch {
	case err == nil && k.IsLink() && !pol.HasLinkBindings():
		// No interface neighbour is bound: a name is no peer here.
		return scopedPeer{}, fmt.Errorf("peer %q is not an IP address (and the policy binds no interface neighbour): %w", req.Peer, control.ErrInvalid)
	case err != nil || k.VRF != "":
		return scopedPeer{}, fmt.Errorf("peer %q is not an IP address or an interface neighbour's interface (name a VRF with --vrf): %w", req.Peer, control.ErrInvalid)
	}
	k.VRF = req.VRF
	s := scopedPeer{key: k, addr: k.Addr}
	if k.IsLink() {
		s.addr = rv.recon.learnedAddr(k)
	}
	where := ""
	if req.VRF != "" {
		where = " in vrf " + req.VRF
	}
	b, err := pol.BindingForKey(k)
	if err != nil {
		return s, fmt.Errorf("peer %s%s: no binding of the policy covers it (check the address or interface and --vrf): %w", req.Peer, where, control.ErrNotFound)
	}
	if kc, ok := pol.Chain(b.KeyChain); ok && kc.SourceChain != req.Chain {
		return s, fmt.Errorf("peer %s%s uses key chain %s (source chain %s), not %s: %w",
			req.Peer, where, b.KeyChain, kc.SourceChain, req.Chain, control.ErrInvalid)
	}
	return s, nil
}

// revokePeer takes the key off one established session. The peer's rotator
// goroutine is held off meanwhile so that it stays the socket's only
// writer, and then resumes with the desired state without the key.
func (rv *revocations) revokePeer(ctx context.Context, snap *keystore.Snapshot, p *peerState, rk revokedKey, now time.Time) control.RevokeSocket {
	id := p.info.Key()
	rs := control.RevokeSocket{Socket: "peer " + id.String(), Peer: p.info.Neighbor.String()}
	// The desired state without the revoked key: it picks the replacement
	// and then resumes the peer's rotation (the controller owns it then).
	want, pk, werr := rv.recon.desiredFor(snap, p, now)
	var pref *policy.ScheduledKey
	if werr == nil {
		if k, ok := pk.PreferredKey(); ok {
			pref = &k
		}
		only := false
		if rv.ctrl.Exclusive(ctx, id, want, func(sock tcpao.Socket) { only = rv.revokeOn(sock, rk, pref, &rs) }) {
			if only {
				rv.revokeOnly(ctx, p, &rs)
			}
			return rs
		}
	}
	// No rotation machine runs on the session (yet): stop any that
	// starts, revoke, then start it on the socket.
	sock := rv.o.SocketOf(p.handle)
	select {
	case <-rv.ctrl.PeerDown(id):
	case <-ctx.Done():
		// Its machine is in a step that does not return: the socket is
		// not touched beside it. The machine restarts once it returns.
		rs.Action, rs.Error = control.ActionError, "the peer's rotation machine is in a step that has not returned; not revoked on this socket"
		if werr == nil {
			_, _, _ = rv.ctrl.Adopt(id, p.handle, sock, want)
		}
		return rs
	}
	if rv.revokeOn(sock, rk, pref, &rs) {
		rv.revokeOnly(ctx, p, &rs)
	}
	if werr == nil {
		if _, _, err := rv.ctrl.Adopt(id, p.handle, sock, want); err != nil {
			rv.log.Warn("resuming the peer after revoke", "peer", id, "err", err)
		}
	}
	return rs
}

// revokeOn deletes the revoked key rk from sock, first moving Current_key
// and RNext_key to pref (or another key) when the key is one of them: one
// forced TCP_AO_DEL_KEY naming the replacement, atomic. A key under rk's
// IDs with other material is not rk: it stays (otherMaterial). The read
// (one GET_KEYS: it carries each key's Current/RNext flags, and the
// fingerprint of the key under rk's IDs alone: the others' material is not
// asked about) and the delete share one borrow of the descriptor. It reports whether the key is the
// session's only one: the caller then runs the policy's on_revoke_only_key
// (revokeOnly), outside the borrow (a reset asks the speaker, which must not
// wait on a descriptor aokeyd holds).
func (rv *revocations) revokeOn(sock tcpao.Socket, rk revokedKey, pref *policy.ScheduledKey, rs *control.RevokeSocket) (only bool) {
	err := tcpao.Batch(sock, func(s tcpao.Socket) error {
		keys, err := s.Keys(rk.filter()) // only a key under the revoked IDs needs its material
		if isNoAO(err) {
			rs.Action = control.ActionAbsent
			return nil
		}
		if err != nil {
			return err
		}
		var victim *tcpao.KeyInfo
		var others []tcpao.KeyInfo
		var other *tcpao.KeyInfo
		for i, k := range keys {
			switch ids, same := rk.is(k); {
			case same:
				victim = &keys[i]
			case ids:
				other = &keys[i]
			default:
				others = append(others, k)
			}
		}
		if victim == nil {
			rs.Action = control.ActionAbsent
			if other != nil {
				rv.otherMaterial(rs, *other)
			}
			return nil
		}
		if len(others) == 0 {
			only = true
			return nil
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
		if err := tcpao.DeleteKey(s, del); err != nil {
			rs.Error = err.Error()
		}
		return nil
	})
	if err != nil {
		rs.Error = err.Error()
		return false
	}
	return only
}

// revokeOnly runs the policy's on_revoke_only_key for a session whose only
// key was the revoked one.
func (rv *revocations) revokeOnly(ctx context.Context, p *peerState, rs *control.RevokeSocket) {
	if p.binding != nil && p.binding.Safety.OnRevokeOnlyKey == policy.RevokeReset {
		rs.Action = control.ActionReset
		if err := rv.o.Speaker.ResetPeer(ctx, p.info.Key(), "TCP-AO key revoked"); err != nil {
			rs.Error = err.Error()
		}
		return
	}
	rs.Action = control.ActionKept
	rs.Error = "the revoked key is the session's only key and on_revoke_only_key is keep: traffic is still signed with it"
}

// candidates are the listener's keys under the revoked key's IDs, in one
// read of the listener that fingerprints those keys alone
// (KeyFilter.FingerprintIDs): a fleet's listener holds three keys a peer,
// so a read that fingerprinted every key cost three HMACs a peer, and a
// read of its own for each candidate (KeyFilter.Ref) cost a getsockopt and
// a walk of the kernel's whole key list a peer, O(peers^2) in a global
// revoke. Each candidate's material is then the revoked key's or not
// (revokedKey.is).
func (r *listenerRevoke) candidates(s tcpao.Socket) ([]tcpao.KeyInfo, error) {
	keys, err := s.Keys(r.key.filter())
	return slices.DeleteFunc(keys, func(k tcpao.KeyInfo) bool { ids, _ := r.key.is(k); return !ids }), err
}
