package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/rotator"
)

// rotate is Daemon.Rotate (control.Backend): roll now to the newest key the source
// holds for the peer, ahead of its send time: that key, once (early.go).
// The requests are in the early-roll record before any pass acts on them
// (earlyRolls.ask); when it cannot be written no roll starts.
func (e *earlyRolls) rotate(ctx context.Context, req control.RotateRequest) (control.RotateResult, error) {
	var res control.RotateResult
	snap, release := e.shared()
	defer release()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	now := time.Now()
	var targets []rotateTarget
	if e.o.Executor != nil {
		// The speaker keys its own sockets: every peer of the policy is
		// its, session up or not (its list prefers the key).
		for _, id := range e.recon.execPeers() {
			targets = append(targets, rotateTarget{id: id, addr: id.Addr, up: true})
		}
	} else {
		for _, p := range e.table.peerList() {
			targets = append(targets, rotateTarget{id: p.info.Key(), addr: p.info.Neighbor, up: p.handle != nil, session: sessionOf(p.handle)})
		}
	}
	// One peer by address, in the VRF named (without one: every VRF that
	// has the address), or by peer.Key's text.
	targets = slices.DeleteFunc(targets, func(t rotateTarget) bool {
		return !req.All && t.id.String() != req.Peer && (t.addr.String() != req.Peer || req.VRF != "" && req.VRF != t.id.VRF)
	})
	if len(targets) == 0 {
		return res, fmt.Errorf("peer %q has no session aokeyd manages: %w", req.Peer, control.ErrNotFound)
	}
	seq := e.stat.lastRoll() // the steps after it are this rotation's
	asks := map[rotator.PeerID]earlyRoll{}
	at := map[rotator.PeerID]int{} // each ask's outcome in res.Peers
	for _, p := range targets {
		id := p.id
		out := control.RotateOutcome{Seq: seq, Peer: p.addr.String(), VRF: id.VRF}
		pk, err := e.recon.peerDesired(e.policy(), snap, p.addr, id.VRF, now)
		n := early.Newest(pk, now)
		switch {
		case err != nil:
			out.Error = err.Error()
		case !p.up:
			out.Detail = "session is down"
		case n < 0 || n == pk.Preferred:
			out.Detail = "no newer key in the key source for this peer; add one (or wait for the schedule)"
		default:
			asks[id] = earlyRoll{key: early.KeyOf(pk, n), asked: now, session: p.session}
			at[id] = len(res.Peers)
		}
		res.Peers = append(res.Peers, out)
	}
	kept, err := e.ask(asks)
	for id, i := range at {
		out, r := &res.Peers[i], asks[id]
		old, same := kept[id]
		switch {
		case same && old.state == earlyHeld:
			out.Detail = fmt.Sprintf("already rolled to %s ahead of its send start (aoctl rotate at %s); the schedule sends with it from %s",
				r.label(), old.asked.UTC().Format(time.RFC3339), r.key.Start.UTC().Format(time.RFC3339))
		case !same && err != nil:
			out.Error = fmt.Sprintf("the request to roll to %s could not be recorded, so no roll started: %v", r.label(), err)
		default:
			out.Started = true
			out.Detail = "rolling to " + r.label()
		}
	}
	e.recon.askFull()
	return res, nil
}

// rotateTarget is a peer aoctl rotate may roll: up, its session is (an
// executor's peer always is: its list prefers the key), and which
// connection it is (zero for an executor's: none is followed).
type rotateTarget struct {
	id      rotator.PeerID
	addr    netip.Addr // as the speaker reports it (bgp.PeerInfo.Neighbor)
	up      bool
	session early.Session
}

// observeEarly holds or ends id's early roll that its machine, started
// on the session mid-roll, does not run as a roll (earlyRolls.observe).
// From the controller's Changed (a machine's goroutine: it never waits)
// and the passes.
func (e *earlyRolls) observeEarly(id rotator.PeerID) {
	status := func() (rotator.Status, bool) { return e.ctrl.StatusOf(id) }
	r, why, held, ended := e.observe(id, status, time.Now(), e.ctrl.Config().SwitchTimeout)
	switch {
	case held:
		e.log.Info("aoctl rotate's early roll completed: the session sends with its key", "peer", id, "key", r.label())
		e.recon.wake() // the pass writes the record
	case ended:
		e.log.Warn("aoctl rotate's early roll ends; the schedule governs (aoctl rotate asks again)", "peer", id, "key", r.label(), "why", why)
		e.recon.wake() // the peer's desired state goes back to the schedule's
	}
}

// sessionOf names the connection h is (zero when its inode is not known).
func sessionOf(h bgp.SocketHandle) early.Session {
	if h == nil {
		return early.Session{}
	}
	ref := h.Ref()
	if ref.Inode == 0 {
		return early.Session{}
	}
	return early.Session{Inode: ref.Inode, Local: ref.Local, Remote: ref.Remote}
}

// endUnbound ends the early rolls of peers that left the policy, the
// peers no session report brought back since the start included (the
// others are forgotten with their binding). Reconcile goroutine.
func (e *earlyRolls) endUnbound() {
	for _, id := range e.peers() {
		if _, err := e.policy().BindingForKey(id); err != nil {
			e.forget(id)
			e.log.Info("aoctl rotate's early roll ends: the peer left the policy", "peer", id)
		}
	}
}
