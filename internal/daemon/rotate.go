package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/early"
)

// Rotate implements control.Backend: roll now to the newest key the source
// holds for the peer, ahead of its send time: that key, once (early.go).
func (d *Daemon) Rotate(ctx context.Context, req control.RotateRequest) (control.RotateResult, error) {
	var res control.RotateResult
	snap, release := d.shared()
	defer release()
	if snap == nil {
		return res, errors.New("no good key snapshot yet")
	}
	now := time.Now()
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
		n := early.Newest(pk, now)
		switch {
		case err != nil:
			out.Error = err.Error()
		case p.handle == nil:
			out.Detail = "session is down"
		case n < 0 || n == pk.Preferred:
			out.Detail = "no newer key in the key source for this peer; add one (or wait for the schedule)"
		default:
			r := earlyRoll{key: early.KeyOf(pk, n), asked: now}
			if old, same := d.ops.early.ask(id, r); same && old.state == earlyHeld {
				out.Detail = fmt.Sprintf("already rolled to %s ahead of its send start (aoctl rotate at %s); the schedule sends with it from %s",
					r.label(), old.asked.UTC().Format(time.RFC3339), r.key.Start.UTC().Format(time.RFC3339))
				break
			}
			out.Started = true
			out.Detail = "rolling to " + r.label()
		}
		res.Peers = append(res.Peers, out)
	}
	d.Kick()
	return res, nil
}
