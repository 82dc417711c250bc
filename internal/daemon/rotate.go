package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/aokeyd/aokeyd/internal/control"
)

// Rotate implements control.Backend: roll now to the newest key the source
// holds for the peer, ahead of its send time.
func (d *Daemon) Rotate(ctx context.Context, req control.RotateRequest) (control.RotateResult, error) {
	var res control.RotateResult
	snap, release := d.shared()
	defer release()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	now := d.o.Clock.Now()
	var targets []*peerState
	for _, p := range d.peerList() {
		// One peer by address, in the VRF named (without one: every VRF
		// that has the address), or by peer.Key's text.
		if req.All || p.id.String() == req.Peer ||
			p.info.Neighbor.String() == req.Peer && (req.VRF == "" || req.VRF == p.info.VRF) {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return res, fmt.Errorf("peer %q has no session aokeyd manages: %w", req.Peer, control.ErrNotFound)
	}
	seq := d.rolls.last() // the steps after it are this rotation's
	for _, p := range targets {
		id := p.info.Key()
		out := control.RotateOutcome{Seq: seq, Peer: p.info.Neighbor.String(), VRF: p.info.VRF}
		pk, err := d.peerDesired(d.policy(), snap, p.info.Neighbor, p.info.VRF, now)
		switch {
		case err != nil:
			out.Error = err.Error()
		case p.handle == nil:
			out.Detail = "session is down"
		case newest(pk) < 0 || newest(pk) == pk.Preferred:
			out.Detail = "no newer key in the key source for this peer; add one (or wait for the schedule)"
		default:
			d.ops.mu.Lock()
			d.ops.early[id] = true
			d.ops.mu.Unlock()
			out.Started = true
			out.Detail = "rolling to " + pk.SourceChain + "/" + pk.Keys[newest(pk)].MKT.Name
		}
		res.Peers = append(res.Peers, out)
	}
	d.Kick()
	return res, nil
}
