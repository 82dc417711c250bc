package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// New material under an installed key's IDs (an edit in place) is held
// back by the planner on every socket (rotator.ReasonEdited) until an
// operator approves it with aoctl replace: the approval names the
// material the key source has then (a later edit is held back again), and
// the desired state then lists the key in rotator.Desired.Replace. The
// listeners take it at the next pass; a session takes it by one forced
// delete naming a key its peer was seen to use, and a session with no
// such key is reset (the planned reset) so that it comes back through the
// listener with the new material. Approvals live in memory: after a
// restart an edit not yet applied is held back again.

// material is what an approval names of an MKT: everything the kernel
// compares, the secret by its fingerprint.
type material struct {
	alg     tcpao.Algorithm
	macLen  uint8
	include bool
	fp      tcpao.Fingerprint
}

func materialOf(m *keystore.MKT) material {
	return material{alg: m.Algorithm, macLen: m.MACLen, include: m.IncludeTCPOptions, fp: m.Secret.Fingerprint()}
}

// approvedRefs are pk's keys whose material an operator approved (aoctl
// replace), as kernel key references for peer on ifindex idx.
func (ow *ownership) approvedRefs(pk policy.PeerKeys, peer netip.Prefix, idx int) []tcpao.KeyRef {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	if len(ow.approved) == 0 {
		return nil
	}
	var out []tcpao.KeyRef
	for i := range pk.Keys {
		m := &pk.Keys[i].MKT
		if a, ok := ow.approved[pk.SourceChain+"/"+m.Name]; ok && a == materialOf(m) {
			out = append(out, tcpao.KeyRef{Peer: peer, IfIndex: idx, SendID: m.SendID, RecvID: m.RecvID})
		}
	}
	return out
}

// hasMaterial reports whether the key with ids on the socket read as obs
// has the material want gives it.
func hasMaterial(obs rotator.Observed, want rotator.Desired, ids [2]uint8) bool {
	for _, k := range want.Keys {
		if k.SendID != ids[0] || k.RecvID != ids[1] {
			continue
		}
		return slices.ContainsFunc(obs.Keys, func(ki tcpao.KeyInfo) bool {
			return ki.SendID == ids[0] && ki.RecvID == ids[1] && ki.Algorithm == k.Algorithm && ki.Fingerprint == k.Secret.Fingerprint()
		})
	}
	return false
}

// replaceWait bounds how long Replace waits for the listeners' pass.
const replaceWait = 10 * time.Second

// kickAndWait asks for a pass that recomputes the desired state and waits
// (at most replaceWait) until a full pass has run; false when none did.
func (ow *ownership) kickAndWait(ctx context.Context) bool {
	_, full := ow.recon.passes()
	ow.recon.askFull()
	wctx, cancel := context.WithTimeout(ctx, replaceWait)
	defer cancel()
	for {
		if _, f := ow.recon.passes(); f > full {
			return true
		}
		select {
		case <-wctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// replace is Daemon.Replace (control.Backend): it approves the key source's
// material of req's key, waits for the listeners to take it, then applies
// it to every session that reads the key's chain and resets those that
// cannot take it in place.
func (ow *ownership) replace(ctx context.Context, req control.ReplaceRequest) (control.ReplaceResult, error) {
	if req.MD5 {
		return ow.replaceMD5(ctx, req)
	}
	start := time.Now()
	res := control.ReplaceResult{Chain: req.Chain, Key: req.Key, Sockets: []control.RevokeSocket{}}
	snap := ow.snapshot()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	defer snap.Zero()
	var mkt *keystore.MKT
	if c := snap.Chains[req.Chain]; c != nil {
		if i := slices.IndexFunc(c.Keys, func(m keystore.MKT) bool { return m.Name == req.Key }); i >= 0 {
			mkt = &c.Keys[i]
		}
	}
	if mkt == nil {
		return res, fmt.Errorf("key %s/%s not in the key source: %w", req.Chain, req.Key, control.ErrNotFound)
	}
	ow.mu.Lock()
	if ow.approved == nil {
		ow.approved = map[string]material{}
	}
	ow.approved[req.Chain+"/"+req.Key] = materialOf(mkt)
	ow.mu.Unlock()
	ow.log.Warn("edit in place approved: new material replaces the installed key", "chain", req.Chain, "key", req.Key)

	// The listeners first, so that a session reset below comes back with
	// the new material.
	if !ow.kickAndWait(ctx) {
		res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "listeners", Error: "no reconcile pass within " + replaceWait.String() + ": the listeners take the new material at the next one"})
		return res, nil
	}
	for _, h := range ow.recon.listenerKept() {
		if h.Why == rotator.ReasonEdited && h.Ref.SendID == mkt.SendID && h.Ref.RecvID == mkt.RecvID {
			res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "listeners", Peer: h.Ref.Peer.String(), Error: "still held back on the listener"})
		}
	}
	pol := ow.policy()
	now := time.Now()
	for _, p := range ow.table.peerList() {
		if p.handle == nil || !readsChain(pol, p.info.Key(), req.Chain) {
			continue
		}
		res.Sockets = append(res.Sockets, ow.replacePeer(ctx, snap, p, [2]uint8{mkt.SendID, mkt.RecvID}, now))
	}
	slices.SortFunc(res.Sockets, func(a, b control.RevokeSocket) int { return strings.Compare(a.Socket, b.Socket) })
	res.Elapsed = control.Duration(time.Since(start))
	ow.log.Warn("edit in place applied", "chain", req.Chain, "key", req.Key, "sockets", len(res.Sockets), "elapsed", time.Since(start))
	return res, nil
}

// replacePeer applies the approved material to one session between two
// steps of its rotation machine: the plan's replacement (a forced delete
// naming a key the peer was seen to use, then the add), or, when the
// planner finds no such key, a reset of the session through the speaker.
func (ow *ownership) replacePeer(ctx context.Context, snap *keystore.Snapshot, p *peerState, ids [2]uint8, now time.Time) control.RevokeSocket {
	id := p.info.Key()
	rs := control.RevokeSocket{Socket: "peer " + id.String(), Peer: p.info.Neighbor.String(), Action: control.ActionAbsent}
	want, _, err := ow.recon.desiredFor(snap, p, now)
	if err != nil {
		rs.Action, rs.Error = control.ActionError, err.Error()
		return rs
	}
	reset := false
	ran := ow.ctrl.Exclusive(ctx, id, want, func(sock tcpao.Socket) {
		obs, err := rotator.Observe(sock, rotator.ReadFull)
		if err != nil {
			rs.Error = err.Error()
			return
		}
		if !slices.ContainsFunc(obs.Keys, func(k tcpao.KeyInfo) bool { return k.SendID == ids[0] && k.RecvID == ids[1] }) {
			return
		}
		sp := rotator.PlanSocket(want, obs)
		if slices.ContainsFunc(sp.Blocked, func(h rotator.Held) bool {
			return h.Why == rotator.ReasonNoReplace && h.Ref.SendID == ids[0] && h.Ref.RecvID == ids[1]
		}) {
			reset = true
			return
		}
		ops := slices.DeleteFunc(slices.Clone(sp.Ops), func(o rotator.Op) bool { return o.Why != rotator.ReasonReplace })
		if len(ops) == 0 {
			// Nothing to replace: the session's machine took the new
			// material already (it has the approval from the last pass),
			// or it is not what the session should have.
			rs.Action = control.ActionUnchanged
			if hasMaterial(obs, want, ids) {
				rs.Action = control.ActionReplaced
			}
			return
		}
		rs.Action = control.ActionReplaced
		if _, err := rotator.Apply(sock, ops); err != nil {
			rs.Error = err.Error()
		}
	})
	if !ran {
		rs.Action, rs.Error = control.ActionError, "the peer's rotation machine did not take the request (it is in a step that has not returned, or the session went)"
		return rs
	}
	if reset {
		rs.Action = control.ActionReset
		if err := ow.o.Speaker.ResetPeer(ctx, p.info.Key(), "TCP-AO key replaced in place (aoctl replace)"); err != nil {
			rs.Error = err.Error()
		}
	}
	return rs
}

// replaceMD5 applies a chain's changed TCP-MD5 password at the operator's
// planned reset (aoctl replace CHAIN --md5): the change is approved for
// the chain's TCP-MD5 peers, the listeners take it at the next pass (in
// place: the kernel replaces an MD5 key's password), and each peer's
// established session is reset to reconnect with it. A TCP-MD5 session
// has one password for its life: without the reset it would run on with
// the old one until its next reconnect, which the new password must then
// carry at both ends.
func (ow *ownership) replaceMD5(ctx context.Context, req control.ReplaceRequest) (control.ReplaceResult, error) {
	start := time.Now()
	res := control.ReplaceResult{Chain: req.Chain, Sockets: []control.RevokeSocket{}}
	snap, release := ow.shared()
	if snap == nil {
		release()
		return res, errors.New("no good key snapshot yet")
	}
	pol, now := ow.policy(), time.Now()
	var peers []policy.Binding
	ow.mu.Lock()
	if ow.md5Approved == nil {
		ow.md5Approved = map[netip.Prefix]tcpao.Fingerprint{}
	}
	for _, b := range pol.Bindings() {
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err != nil || !md5Peer(pk) || pk.SourceChain != req.Chain {
			continue
		}
		ow.md5Approved[rotator.MD5Prefix(b.Neighbor)] = pk.MD5.Secret.Fingerprint()
		peers = append(peers, b)
	}
	ow.mu.Unlock()
	release()
	if len(peers) == 0 {
		return res, fmt.Errorf("chain %s: no TCP-MD5 peer reads its password: %w", req.Chain, control.ErrNotFound)
	}
	ow.log.Warn("TCP-MD5 password change approved: the listeners take it and the sessions are reset", "chain", req.Chain, "peers", len(peers))
	if !ow.kickAndWait(ctx) {
		res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "listeners", Error: "no reconcile pass within " + replaceWait.String() + ": the listeners take the new password at the next one"})
		return res, nil
	}
	held := ow.recon.md5HeldNow()
	for _, b := range peers {
		r := control.RevokeSocket{Socket: "listeners", Peer: b.Neighbor.String(), Action: control.ActionReplaced}
		if slices.ContainsFunc(held, func(x rotator.MD5Held) bool {
			return x.Why == rotator.ReasonEdited && x.Ref.Peer.Contains(b.Neighbor.Addr())
		}) {
			r.Action, r.Error = "", "still held back on the listener"
		}
		res.Sockets = append(res.Sockets, r)
		id := peer.KeyOf(b.Neighbor.Addr(), b.VRF)
		if p := ow.table.peer(id); p == nil || !p.info.Established() || r.Error != "" {
			continue
		}
		s := control.RevokeSocket{Socket: "session", Peer: b.Neighbor.String(), Action: control.ActionReset}
		if err := ow.o.Speaker.ResetPeer(ctx, id, "TCP-MD5 password changed (aoctl replace --md5)"); err != nil {
			s.Action, s.Error = "", err.Error()
		}
		res.Sockets = append(res.Sockets, s)
	}
	res.Elapsed = control.Duration(time.Since(start))
	return res, nil
}
