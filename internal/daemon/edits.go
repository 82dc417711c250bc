package daemon

import (
	"slices"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// What status says of edits in place (rotator's edit.go decides them):
// for each of a peer's keys with new material in the key source under an
// installed key's IDs, on its session and on the listener, the rule that
// held it back or applied it. Invariants:
//   - A held edit is shown while the last plan of its socket held it
//     (the machine's last full plan; the listeners' last sync).
//   - An applied edit is shown while the desired state holds the
//     material it applied: from the plan that applied it until the key
//     source changes that key again or drops it.

// noteListenerEdits records what the last listener sync decided of edits
// in place: edits are the plans' edits, applied only where the sync of
// their listener succeeded. The reconcile goroutine calls it.
func (rc *reconciler) noteListenerEdits(edits []rotator.Edit) {
	want := func(e rotator.Edit) bool {
		for _, w := range []rotator.Desired{rc.want.v4, rc.want.v6} {
			if slices.ContainsFunc(w.Keys, func(k rotator.DesiredKey) bool { return k.KeyRef == e.Ref && k.Secret.Fingerprint() == e.FP }) {
				return true
			}
		}
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	applied := slices.DeleteFunc(slices.Clone(rc.editsApplied), func(e rotator.Edit) bool { return !want(e) })
	var held []rotator.Edit
	for _, e := range edits {
		if !e.Rule.Applied() {
			held = append(held, e)
			continue
		}
		applied = slices.DeleteFunc(applied, func(x rotator.Edit) bool { return x.Ref == e.Ref })
		applied = append(applied, e)
		rc.log.Info("edit in place applied on the listener", "key", e.Ref.String(), "rule", e.Rule.String(), "why", e.Rule.Text())
	}
	rc.editsHeld, rc.editsApplied = held, applied
}

// listenerEditsFor are the listener's edits (held by the last sync, then
// applied) of the keys for peer p's address (same L3 device, the key's
// prefix holds the address).
func (rc *reconciler) listenerEditsFor(p bgp.PeerInfo) []rotator.Edit {
	rc.mu.Lock()
	all := slices.Concat(rc.editsHeld, rc.editsApplied)
	rc.mu.Unlock()
	idx, _ := ifIndex(p.VRF)
	return slices.DeleteFunc(all, func(e rotator.Edit) bool {
		return e.Ref.IfIndex != idx || !e.Ref.Peer.Contains(p.Neighbor.Unmap())
	})
}

// editStatus is the status of a peer's edits: its session's (from its
// machine) and the listener's for its address, named from the key source.
func editStatus(session, listener []rotator.Edit, names map[[2]uint8]keyName) []control.EditStatus {
	var out []control.EditStatus
	for _, s := range []struct {
		socket string
		es     []rotator.Edit
	}{{control.EditSession, session}, {control.EditListener, listener}} {
		for _, e := range s.es {
			es := control.EditStatus{SendID: e.Ref.SendID, RecvID: e.Ref.RecvID, Socket: s.socket, Rule: controlEditRule(e.Rule), Applied: e.Rule.Applied()}
			if n, ok := names[[2]uint8{e.Ref.SendID, e.Ref.RecvID}]; ok {
				es.Chain, es.Key = n.chain, n.mkt.Name
			}
			out = append(out, es)
		}
	}
	return out
}

// controlEditRule is r in the control API's words.
func controlEditRule(r rotator.EditRule) control.EditRule {
	switch r {
	case rotator.EditUnused:
		return control.EditAppliedUnused
	case rotator.EditPeerDown:
		return control.EditAppliedPeerDown
	case rotator.EditApproved:
		return control.EditAppliedApproved
	case rotator.EditInUse:
		return control.EditHeldInUse
	case rotator.EditUnread:
		return control.EditHeldUnread
	case rotator.EditUnsettled:
		return control.EditHeldUnsettled
	}
	return control.EditRule(r.String())
}
