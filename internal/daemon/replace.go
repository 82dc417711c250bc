package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

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
func (d *Daemon) approvedRefs(pk policy.PeerKeys, peer netip.Prefix, idx int) []tcpao.KeyRef {
	d.ops.mu.Lock()
	defer d.ops.mu.Unlock()
	if len(d.ops.approved) == 0 {
		return nil
	}
	var out []tcpao.KeyRef
	for i := range pk.Keys {
		m := &pk.Keys[i].MKT
		if a, ok := d.ops.approved[pk.SourceChain+"/"+m.Name]; ok && a == materialOf(m) {
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
func (d *Daemon) kickAndWait(ctx context.Context) bool {
	_, full := d.Passes()
	d.Kick()
	wctx, cancel := context.WithTimeout(ctx, replaceWait)
	defer cancel()
	for {
		if _, f := d.Passes(); f > full {
			return true
		}
		select {
		case <-wctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Replace implements control.Backend: it approves the key source's
// material of req's key, waits for the listeners to take it, then applies
// it to every session that reads the key's chain and resets those that
// cannot take it in place.
func (d *Daemon) Replace(ctx context.Context, req control.ReplaceRequest) (control.ReplaceResult, error) {
	if req.MD5 {
		return d.replaceMD5(ctx, req)
	}
	start := time.Now()
	res := control.ReplaceResult{Chain: req.Chain, Key: req.Key, Sockets: []control.RevokeSocket{}}
	snap := d.snapshot()
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
	d.ops.mu.Lock()
	if d.ops.approved == nil {
		d.ops.approved = map[string]material{}
	}
	d.ops.approved[req.Chain+"/"+req.Key] = materialOf(mkt)
	d.ops.mu.Unlock()
	d.log.Warn("edit in place approved: new material replaces the installed key", "chain", req.Chain, "key", req.Key)

	// The listeners first, so that a session reset below comes back with
	// the new material.
	if !d.kickAndWait(ctx) {
		res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "listeners", Error: "no reconcile pass within " + replaceWait.String() + ": the listeners take the new material at the next one"})
		return res, nil
	}
	for _, h := range d.listenerKept() {
		if h.Why == rotator.ReasonEdited && h.Ref.SendID == mkt.SendID && h.Ref.RecvID == mkt.RecvID {
			res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "listeners", Peer: h.Ref.Peer.String(), Error: "still held back on the listener"})
		}
	}
	pol := d.policy()
	now := time.Now()
	for _, p := range d.peerList() {
		if p.handle == nil || !readsChain(pol, p.info.Neighbor, p.info.VRF, req.Chain) {
			continue
		}
		res.Sockets = append(res.Sockets, d.replacePeer(ctx, snap, p, [2]uint8{mkt.SendID, mkt.RecvID}, now))
	}
	slices.SortFunc(res.Sockets, func(a, b control.RevokeSocket) int { return strings.Compare(a.Socket, b.Socket) })
	res.Elapsed = control.Duration(time.Since(start))
	d.log.Warn("edit in place applied", "chain", req.Chain, "key", req.Key, "sockets", len(res.Sockets), "elapsed", time.Since(start))
	return res, nil
}

// replacePeer applies the approved material to one session between two
// steps of its rotation machine: the plan's replacement (a forced delete
// naming a key the peer was seen to use, then the add), or, when the
// planner finds no such key, a reset of the session through the speaker.
func (d *Daemon) replacePeer(ctx context.Context, snap *keystore.Snapshot, p *peerState, ids [2]uint8, now time.Time) control.RevokeSocket {
	id := p.info.Key()
	rs := control.RevokeSocket{Socket: "peer " + id.String(), Peer: p.info.Neighbor.String(), Action: control.ActionAbsent}
	want, _, err := d.desiredFor(snap, p, now)
	if err != nil {
		rs.Action, rs.Error = control.ActionError, err.Error()
		return rs
	}
	reset := false
	ran := d.ctrl.Exclusive(ctx, id, want, func(sock tcpao.Socket) {
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
		if err := d.o.Speaker.ResetPeer(ctx, p.info.Key(), "TCP-AO key replaced in place (aoctl replace)"); err != nil {
			rs.Error = err.Error()
		}
	}
	return rs
}
