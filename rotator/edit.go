package rotator

import (
	"fmt"

	"github.com/aokeyd/aokeyd/tcpao"
)

// An edit in place is new material (secret, algorithm, MAC length or
// tcp_options) in the desired state under the IDs of an installed key.
// A socket cannot hold both, so applying it deletes the installed key
// first: a peer still using the installed material then fails. The rule,
// per socket (PlanSocket, decideEdits):
//   - Approved (Desired.Replace): applied, whatever the key did.
//   - Held back while the installed key authenticated something: on an
//     established socket its pkt_good is above zero or it is Current_key
//     or RNext_key (the keys the session carries, CarriedKeys); on a
//     listener its pkt_good is above zero (it verified a SYN) or a
//     session carries it (Observed.Carried). Also held while a
//     Desired.Frozen range covers it (what the sessions carry is not
//     known yet after a start, or its chain is degraded), and, on an
//     established socket, until the peer is seen to choose Current_key
//     (Observed.Settled): after aokeyd's own write of Current_key or
//     RNext_key the peer's RNext may still name the key, and Current_key
//     would follow it to the new material, which the peer drops.
//   - Else applied at once (EditUnused): holding it back protects no
//     session.
//   - On a listener, a key that authenticated something is applied too
//     when only peers that are down carry it and their new connections
//     fail against it (EditPeerDown): it verified bad segments and no
//     good one since the last session that carried it ended
//     (Observed.Down). Holding it back keeps nothing up and keeps the
//     peer out.
//
// The model (rotator/model/roll.pml) checks the rule but EditPeerDown,
// which needs a peer that is down and holds the new material; the
// planner's property test checks all of it against the plans.

// EditRule says which rule decided an edit in place.
type EditRule uint8

// Edit rules: the Applied ones let the plan replace the installed key.
const (
	EditUnused    EditRule = iota + 1 // applied: the installed key authenticated nothing
	EditPeerDown                      // applied: its peer is down and the peer's connections fail against it
	EditApproved                      // applied: an operator approved it (Desired.Replace)
	EditInUse                         // held: the installed key authenticated something
	EditUnread                        // held: a Desired.Frozen range covers it (start-up gate, degraded chain)
	EditUnsettled                     // held: the peer's choice of Current_key is not known yet (Observed.Settled)
)

var editRuleNames = [...]string{
	EditUnused:    "applied-unused",
	EditPeerDown:  "applied-peer-down",
	EditApproved:  "applied-approved",
	EditInUse:     "held-in-use",
	EditUnread:    "held-unread",
	EditUnsettled: "held-unsettled",
}

func (r EditRule) String() string {
	if int(r) < len(editRuleNames) && editRuleNames[r] != "" {
		return editRuleNames[r]
	}
	return fmt.Sprintf("edit-rule(%d)", uint8(r))
}

// Text says what the rule decided, for people.
func (r EditRule) Text() string {
	switch r {
	case EditUnused:
		return "edit applied: key authenticated nothing (no good segments, carried by no session)"
	case EditPeerDown:
		return "edit applied: peer down, its connections fail against the installed key (bad segments, no good one since its session ended)"
	case EditApproved:
		return "edit applied: approved with aoctl replace"
	case EditInUse:
		return "edit held: the installed key authenticated segments or carries a session"
	case EditUnread:
		return "edit held: what the sessions carry is not read yet since the start, or the key's chain is degraded"
	case EditUnsettled:
		return "edit held: the peer was not yet seen to choose its key since aokeyd last set Current_key or RNext_key"
	}
	return r.String()
}

// Applied reports whether the rule lets the edit take effect.
func (r EditRule) Applied() bool { return r == EditUnused || r == EditPeerDown || r == EditApproved }

// Edit is one edit in place a plan decided (SocketPlan.Edits): the
// desired key, its material's fingerprint, and the rule.
type Edit struct {
	Ref  tcpao.KeyRef
	FP   tcpao.Fingerprint
	Rule EditRule
}

// DownKey is a listener key no session that is up carries, with its
// fingerprint and counters as they were when that was first seen
// (DownWatch): the base from which EditPeerDown counts the peer's
// connections.
type DownKey struct {
	Ref             tcpao.KeyRef
	FP              tcpao.Fingerprint
	PktGood, PktBad uint64
}

// editDetails are the Kept details of the held rules.
var editDetails = map[EditRule]string{
	EditInUse:     "new material (secret, algorithm, MAC length or tcp_options) under the IDs of an installed key that authenticated segments or carries a session: the installed key stays and the new material is not applied to this socket; give the new material new IDs and roll to it, or approve it with aoctl replace (which resets the session)",
	EditUnread:    "new material (secret, algorithm, MAC length or tcp_options) under the IDs of an installed key, while what the sessions carry is not read yet since the start (or the key's chain is degraded): the installed key stays until it is known to authenticate nothing",
	EditUnsettled: "new material (secret, algorithm, MAC length or tcp_options) under the IDs of an installed key that authenticated nothing on this socket, but the peer has not yet been seen to choose the key it asks for since aokeyd last set Current_key or RNext_key: the installed key stays until it has",
}

// decideEdits applies the rule for edits in place to jobs: a job whose key
// is an edit goes ahead when a rule applies it (its installed key may be
// deleted for the replacement, editOK), else it is taken out and held
// back: its blockers stay (held), the installed key stands in for the
// desired one, and the desired key is Kept with ReasonEdited. Every edit
// and its rule go to SocketPlan.Edits.
func (p *planner) decideEdits(jobs []addJob, o *Observed) []addJob {
	out := jobs[:0]
	for _, j := range jobs {
		rule := p.editRule(j, o)
		if rule == 0 || rule.Applied() {
			if rule != 0 {
				dk := &p.d.Keys[j.d]
				p.sp.Edits = append(p.sp.Edits, Edit{Ref: dk.KeyRef, FP: dk.Secret.Fingerprint(), Rule: rule})
				// Only the keys under the edit's IDs: another key in the
				// way (one ID shared) keeps the never-strand rule's say.
				for _, b := range j.blockers {
					if p.edits(j, b, o) {
						p.entries[b].editOK = true
					}
				}
			}
			out = append(out, j)
			continue
		}
		r := normRef(p.d.Keys[j.d].KeyRef)
		for _, b := range j.blockers {
			en := &p.entries[b]
			en.held = true
			if en.ref.SendID == r.SendID && en.ref.RecvID == r.RecvID {
				// The installed key stands in for its edit: Current_key and
				// RNext_key treat it as the desired key, so that no plan
				// moves them off it while the edit is held back.
				en.d = j.d
			}
		}
		dk := &p.d.Keys[j.d]
		p.sp.Edits = append(p.sp.Edits, Edit{Ref: dk.KeyRef, FP: dk.Secret.Fingerprint(), Rule: rule})
		p.sp.Kept = append(p.sp.Kept, Held{Ref: dk.KeyRef, Why: ReasonEdited, Detail: editDetails[rule]})
	}
	return out
}

// editRule is the rule for job j when its key is new material under the
// IDs of an installed key (a blocker with both IDs and an overlapping
// prefix whose material differs), 0 when it is not an edit. With several
// such keys, any one held holds the edit.
func (p *planner) editRule(j addJob, o *Observed) EditRule {
	var rule EditRule
	for _, b := range j.blockers {
		if !p.edits(j, b, o) {
			continue
		}
		this := p.editOf(b, o)
		if !this.Applied() {
			return this
		}
		if rule == 0 || rule == EditUnused {
			rule = this
		}
	}
	return rule
}

// edits reports whether job j's key is new material over blocker b: an
// installed key of aokeyd's under both its IDs with other material.
func (p *planner) edits(j addJob, b int, o *Observed) bool {
	dk := &p.d.Keys[j.d]
	r := normRef(dk.KeyRef)
	en := &p.entries[b]
	return en.oi >= 0 && !en.foreign && en.ref.SendID == r.SendID && en.ref.RecvID == r.RecvID && !sameMaterial(&dk.Key, &o.Keys[en.oi])
}

// editOf is the rule for replacing installed entry e by new material.
func (p *planner) editOf(e int, o *Observed) EditRule {
	en := &p.entries[e]
	ki := &o.Keys[en.oi]
	switch {
	case en.approved:
		return EditApproved
	case len(p.d.Frozen) > 0 && p.frozen(en.ref):
		return EditUnread
	case p.listen && ki.PktGood == 0 && !en.inUse:
		return EditUnused
	case p.listen && failing(ki, o.Down):
		return EditPeerDown
	case p.listen || carries(ki):
		return EditInUse
	case !o.Settled:
		return EditUnsettled
	}
	return EditUnused
}

// failing reports whether listener key ki is one only peers that are
// down carry (down names it, with its material) and it verified bad
// segments and no good one since that was first seen.
func failing(ki *tcpao.KeyInfo, down []DownKey) bool {
	for i := range down {
		x := &down[i]
		if normRef(x.Ref) == ki.KeyRef && x.FP == ki.Fingerprint {
			return ki.PktBad > x.PktBad && ki.PktGood == x.PktGood
		}
	}
	return false
}
