package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/rotator"
)

// What the start-up gate (carried.go sessionsRead) holds back is said:
// status has a line while it holds, and aoctl plan plans the listeners as
// the sync does under it (every key frozen but a revoked one) and lists
// each delete it holds back. Invariants:
//   - the reconciler's gate is non-nil exactly while the gate holds: from New until
//     sessionsRead latches; the reconcile goroutine writes it, any reader
//     loads it.
//   - A held line is a delete the same plan makes without the gate: what
//     the sync does once the sessions are read, if nothing else changed.

// noteGate records the gate's state at a pass: open, or holding with the
// sessions listed or not and how many up were not read.
func (rc *reconciler) noteGate(open, listed bool, unread int) {
	if open {
		rc.gate.Store(nil)
		return
	}
	rc.gate.Store(&control.StartUpGate{Listed: listed, Unread: unread})
}

// startUpGate is the gate's state for status (nil: open).
func (rc *reconciler) startUpGate() *control.StartUpGate {
	g := rc.gate.Load()
	if g == nil {
		return nil
	}
	c := *g
	return &c
}

// gated is a listener's input to the plan under the gate, and without it.
type gated struct{ under, without rotator.Input }

// gateHeld are the plan's lines and steps for the deletes the gate holds
// back on each listener of gs, each key named by name.
func gateHeld(gs []gated, name desired.Namer) (lines []string, steps []control.PlanStep) {
	for _, g := range gs {
		under := rotator.PlanSocket(g.under.Desired, g.under.Observed)
		for _, op := range rotator.PlanSocket(g.without.Desired, g.without.Observed).Ops {
			if op.Kind != rotator.OpDel || slices.ContainsFunc(under.Ops, func(o rotator.Op) bool { return o.Kind == rotator.OpDel && o.Del.KeyRef == op.Del.KeyRef }) {
				continue
			}
			if g.without.SyncDeletes {
				op.Del.Async = false
			}
			text := op.Line()
			text = text[:strings.LastIndex(text, " (")]
			l := rotator.PlanLine{Socket: under.Socket, Kind: under.Kind, Verb: "held", Ref: op.Del.KeyRef, HasRef: true, Why: op.Why,
				Head: fmt.Sprintf("%s %s held", under.Socket, under.Kind),
				Tail: fmt.Sprintf(" %s (start-up-gate): a %s key the sync deletes once every session up has been read since the start", text, op.Why)}
			st := control.PlanStep{Socket: string(l.Socket), Kind: l.Kind.String(), Op: "held", Reason: "start-up-gate", Text: l.Line(),
				KeyRef: &control.PlanKeyRef{SendID: l.Ref.SendID, RecvID: l.Ref.RecvID, Peer: l.Ref.Peer.String(), IfIndex: l.Ref.IfIndex}}
			if name != nil {
				if c, k, ok := name(l.Socket, l); ok {
					st.Chain, st.Key = c, k
				}
			}
			lines = append(lines, l.Line())
			steps = append(steps, st)
		}
	}
	return lines, steps
}
