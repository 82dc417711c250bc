package rotator

import (
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// linearMax is the key count up to which the planner compares keys pairwise
// instead of building an index (established sockets carry a handful).
const linearMax = 32

// entry is one key in the planner's simulation of the socket.
type entry struct {
	ref     tcpao.KeyRef // normalised
	d       int          // index into Desired.Keys, -1 for a key not desired as is
	present bool
	revoked bool
	blocker bool // must be deleted before a desired key can be added
	held    bool // its replacement is blocked: reported once, left in place
	// seen: segments from the peer verified with it (pkt_good > 0), so
	// the peer holds it. Only such a key may be made Current_key by a
	// forced delete that replaces a key.
	seen bool
	// inUse: the key carries a session (see mayRemove); retire and
	// approved are the permissions that let such a key go.
	inUse    bool
	retire   bool
	approved bool
	// editOK: the rule for edits in place applies new material over it
	// (decideEdits): the replacement may delete it although it is in use.
	editOK  bool
	frozen  bool // covered by Desired.Frozen, not desired under its reference, not revoked: stays
	foreign bool // not desired, and Desired.Owner does not own it: stays
	oi      int  // index into Observed.Keys, -1 for an added key
}

type planner struct {
	d       *Desired
	listen  bool
	entries []entry
	cur     int // entry index of Current_key, -1 none
	rnx     int // entry index of RNext_key, -1 none
	sp      SocketPlan
	// carriedIdx indexes Observed.Carried (normalised in carriedRefs) by
	// peer prefix, built on the first lookup of a long list (carried).
	carriedIdx  *refIndex
	carriedRefs []tcpao.KeyRef
	// revokedIdx is Desired.Revoked by reference and material, for a
	// listener's long list (revoked), built on its first lookup.
	revokedIdx map[revokedID]struct{}
}

// PlanSocket plans one socket: the ordered operations that take the observed
// state to the desired one without ever stranding the session. It is pure:
// it reads its arguments and returns a new plan.
//
// The never-strand rule holds whatever the desired state says (a key past
// its lifetime, edited in place, missing from the source): a key in use —
// on an established socket Current_key, RNext_key or a key the peer sent
// with (pkt_good > 0); on a listener a key that Observed.Carried names — is
// deleted only when it is revoked (Desired.Revoked names its reference and
// its material), listed in Desired.Replace (an operator
// approved its new material) or, on an established socket, listed in
// Desired.Retire (the roll proved the peer moved off it). Otherwise it
// stays: Deferred when a roll on the socket can move the peer off it, else
// Kept (ReasonCarried). New material under the IDs of an installed key (an
// edit in place) replaces it only where holding it back protects no
// session (edit.go: the installed key authenticated nothing, its peer is
// down and fails against it, or Desired.Replace approves it); else the
// installed key stays and the desired one is Kept (ReasonEdited). Each
// edit's rule is in SocketPlan.Edits. mayRemove is the one check; every
// delete the planner emits passes it.
//
// Order: plain adds; then in-place replacements (delete the conflicting key,
// add its successor); then one TCP_AO_INFO change (RNext, Current_key if the
// present one is not a desired sendable key, ao_required); then deletes of
// keys no longer desired. On a listener every delete is del_async. On an
// established socket deletes are synchronous, a key that is Current_key or
// RNext_key is deleted only by a forced delete naming its replacement, and
// only when it is revoked or replaced in place; a stale key that is still
// Current_key is deferred (Deferred) until the roll moves Current_key.
//
// Installing a key never switches Current_key to a key the peer has not been
// seen to hold: a forced delete that replaces Current_key in place names as
// the new Current_key only a key with pkt_good > 0, else the replacement is
// blocked (only a revoked Current_key is forced off onto any usable key).
//
// On an established socket a key's peer prefix is not compared: the kernel
// looks keys up there by their IDs alone, and an accepted socket carries the
// listener's keys as they are, with the prefix of the binding that covers
// the peer. An observed key with the desired key's IDs, L3 device and
// material, whose prefix overlaps the desired one, is that desired key.
func PlanSocket(d Desired, o Observed) SocketPlan {
	p := planner{d: &d, listen: d.Kind == Listening, cur: -1, rnx: -1}
	p.sp = SocketPlan{Socket: d.Socket, Kind: d.Kind}
	if err := validateDesired(&d); err != nil {
		p.sp.Blocked = append(p.sp.Blocked, Held{Why: ReasonInvalid, Detail: err.Error()})
		return p.sp
	}
	if o.Bare {
		p.sp.Blocked = append(p.sp.Blocked, Held{Why: ReasonInvalid,
			Detail: "read without fingerprints (ReadBare): read the socket with ReadFull to plan"})
		return p.sp
	}
	if !p.listen && !o.HaveAO {
		if len(d.Keys) == 0 && !d.AORequired {
			return p.sp
		}
		p.sp.Blocked = append(p.sp.Blocked, Held{Why: ReasonInvalid,
			Detail: "established socket without TCP-AO: the kernel refuses keys (EISCONN); TCP-AO is set before connect/listen"})
		return p.sp
	}
	p.load(o)
	adds := p.classify()
	adds = p.decideEdits(adds, &o)
	// Room for every op the plan can hold (each add, each delete of a key
	// not desired as is, one TCP_AO_INFO), so that appending never copies
	// the ops (192 bytes each) of a plan of thousands.
	if n := len(adds) + p.undesired(); n > 0 {
		p.sp.Ops = make([]Op, 0, n+1)
	}
	p.emitAdds(adds)
	p.emitInfo(o)
	p.emitDeletes()
	if mutantRevokeSkipsListener && p.listen {
		p.sp.Ops = slices.DeleteFunc(p.sp.Ops, func(op Op) bool {
			return op.Kind == OpDel && slices.ContainsFunc(d.Revoked, func(r RevokedKey) bool {
				return r.SendID == op.Del.SendID && r.RecvID == op.Del.RecvID
			})
		})
	}
	return p.sp
}

// load builds the simulation from the observed keys.
func (p *planner) load(o Observed) {
	keys := p.d.Keys
	p.entries = make([]entry, 0, len(o.Keys)+len(keys))
	var byRef map[refKey]int32
	if len(keys) > linearMax {
		byRef = make(map[refKey]int32, len(keys))
		for i := range keys {
			byRef[keyOf(normRef(keys[i].KeyRef))] = int32(i)
		}
	}
	find := func(r tcpao.KeyRef) int {
		if byRef != nil {
			if i, ok := byRef[keyOf(r)]; ok {
				return int(i)
			}
		} else {
			for i := range keys {
				if normRef(keys[i].KeyRef) == r {
					return i
				}
			}
		}
		if !p.listen {
			for i := range keys {
				if sameSessionKey(normRef(keys[i].KeyRef), r) {
					return i
				}
			}
		}
		return -1
	}
	for i := range o.Keys {
		ki := &o.Keys[i]
		e := entry{ref: normRef(ki.KeyRef), d: -1, present: true, seen: ki.PktGood > 0, oi: i}
		if di := find(e.ref); di >= 0 && sameMaterial(&keys[di].Key, ki) {
			e.d = di
		}
		e.revoked = p.revoked(ki, e.ref)
		e.approved = p.names(p.d.Replace, e.ref)
		e.frozen = !e.revoked && len(p.d.Frozen) > 0 && p.frozen(e.ref) && find(e.ref) < 0
		if p.d.Owner != nil && e.d < 0 && !p.d.Owner.Owns(*ki) {
			// Not aokeyd's: no revoke or approval of aokeyd's names it.
			e.foreign, e.revoked, e.approved = true, false, false
		}
		if c, ok := p.d.Owner.(Claimer); ok && e.d >= 0 {
			c.Claim(*ki) // a desired key in place is aokeyd's (Claimer)
		}
		if p.listen {
			e.inUse = p.carried(o.Carried, e.ref)
		} else {
			e.inUse = ki.PktGood > 0 // Current_key and RNext_key: see del
			e.retire = p.names(p.d.Retire, e.ref)
			if ki.IsCurrent {
				p.cur = len(p.entries)
			}
			if ki.IsRNext {
				p.rnx = len(p.entries)
			}
		}
		p.entries = append(p.entries, e)
	}
}

// mayRemove is the never-strand rule, the one check every delete the
// planner emits passes: a key that carries a session leaves the socket
// only by an explicit operator action (revoked, or new material approved
// with Desired.Replace) or, on an established socket, once the roll proved
// the peer moved off it (Desired.Retire). A key of a frozen binding
// (Desired.Frozen) stays unless revoked. On an established socket a key
// carries the session when the peer sent with it, or while it is
// Current_key or RNext_key (as the plan has left them so far): those two
// go only by a forced delete, which del allows for revoked and approved
// keys alone, so a retire never removes them. A key that new material
// held back (decideEdits) would replace stays for any other change too;
// one the rule for edits lets new material replace (editOK) may go for
// that replacement.
func (p *planner) mayRemove(e int) bool {
	en := &p.entries[e]
	switch {
	case en.foreign:
		return false
	case en.revoked:
		return true
	case en.frozen, en.held:
		// A frozen binding's key stays; an edit held back keeps the
		// installed key it would replace.
		return false
	case !en.inUse || en.approved || en.editOK:
		return true
	}
	return !p.listen && en.retire
}

// undesired counts the observed keys that are not desired as they are: the
// most deletes the plan can hold.
func (p *planner) undesired() int {
	n := 0
	for i := range p.entries {
		if p.entries[i].d < 0 {
			n++
		}
	}
	return n
}

// addJob is one desired key to add and the present keys it must replace.
type addJob struct {
	d        int
	blockers []int
}

// classify finds the desired keys to add and, for each, the present keys
// that would make the kernel answer EEXIST.
func (p *planner) classify() []addJob {
	keys := p.d.Keys
	have := make([]bool, len(keys))
	for i := range p.entries {
		if p.entries[i].d >= 0 {
			have[p.entries[i].d] = true
		}
	}
	var idx *refIndex
	if len(p.entries) > linearMax {
		idx = newRefIndex(len(p.entries))
		for i := range p.entries {
			if p.entries[i].d < 0 {
				idx.add(p.entries[i].ref.Peer, i)
			}
		}
	}
	missing := 0
	for _, h := range have {
		if !h {
			missing++
		}
	}
	jobs := make([]addJob, 0, missing)
	for di := range keys {
		if have[di] {
			continue
		}
		r := normRef(keys[di].KeyRef)
		j := addJob{d: di}
		match := func(ei int) bool {
			if p.entries[ei].d < 0 && conflicts(p.entries[ei].ref, r) {
				j.blockers = append(j.blockers, ei)
				p.entries[ei].blocker = true
			}
			return false
		}
		if idx != nil {
			idx.find(r, match)
		} else {
			for ei := range p.entries {
				match(ei)
			}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func (p *planner) emitAdds(jobs []addJob) {
	// Plain adds first: they cannot fail on a conflict and give forced
	// deletes their replacements.
	for _, j := range jobs {
		if len(j.blockers) == 0 {
			p.add(j.d, ReasonNew)
		}
	}
	// Replacements, repeated while one makes room for another (a key added
	// by one can be the replacement another's forced delete names).
	var pending []addJob
	for _, j := range jobs {
		if len(j.blockers) > 0 {
			pending = append(pending, j)
		}
	}
	for progress := true; progress && len(pending) > 0; {
		progress = false
		left := pending[:0]
		for _, j := range pending {
			if p.replace(j) {
				progress = true
			} else {
				left = append(left, j)
			}
		}
		pending = left
	}
	for _, j := range pending {
		// A replacement that cannot be made is no edit applied: the
		// Blocked entry below says why.
		dk := p.d.Keys[j.d].KeyRef
		p.sp.Edits = slices.DeleteFunc(p.sp.Edits, func(e Edit) bool { return e.Ref == dk })
		foreign := false
		for _, b := range j.blockers {
			p.entries[b].held = true
			foreign = foreign || p.entries[b].foreign
		}
		if foreign {
			p.sp.Blocked = append(p.sp.Blocked, Held{Ref: p.d.Keys[j.d].KeyRef, Why: ReasonForeignClash,
				Detail: "its IDs clash with a key another agent installed, which aokeyd does not delete: the peer's roll waits (give the key other IDs, remove the foreign key, or aoctl adopt it)"})
			continue
		}
		p.sp.Blocked = append(p.sp.Blocked, Held{Ref: p.d.Keys[j.d].KeyRef, Why: ReasonNoReplace,
			Detail: "the key it replaces is in use and no other key the peer was seen to use is installed; roll to a key with other IDs instead"})
	}
}

// replace deletes the keys in the way of job j and adds its key. It reports
// whether the add was emitted.
// An attempt that cannot finish is rolled back: a key is never deleted
// without its successor being added.
func (p *planner) replace(j addJob) bool {
	cur, rnx, nops := p.cur, p.rnx, len(p.sp.Ops)
	var gone []int
	for _, b := range j.blockers {
		if !p.entries[b].present {
			continue
		}
		if p.del(b, ReasonReplace, true) {
			gone = append(gone, b)
		} else {
			for _, u := range gone {
				p.entries[u].present = true
			}
			p.cur, p.rnx, p.sp.Ops = cur, rnx, p.sp.Ops[:nops]
			return false
		}
	}
	p.add(j.d, ReasonReplace)
	return true
}

func (p *planner) add(di int, why Reason) {
	p.sp.Ops = append(p.sp.Ops, Op{Kind: OpAdd, Why: why, Key: p.d.Keys[di].Key})
	p.entries = append(p.entries, entry{ref: normRef(p.d.Keys[di].KeyRef), d: di, present: true, oi: -1})
}

// del emits the delete of entry e. forceOK allows a forced delete when e is
// in use on an established socket. It reports whether the delete was
// emitted.
func (p *planner) del(e int, why Reason, forceOK bool) bool {
	if !p.mayRemove(e) {
		return false
	}
	en := &p.entries[e]
	dk := tcpao.DelKey{KeyRef: en.ref, Async: p.listen}
	newCur, newRNext := -1, -1
	if !p.listen && (e == p.cur || e == p.rnx) {
		if !forceOK {
			return false
		}
		if e == p.cur {
			// Replacing Current_key switches to another key: only to one
			// the peer was seen to hold. A revoked key goes whatever.
			if newCur = p.pickCurrent(e, why == ReasonReplace); newCur < 0 {
				return false
			}
			dk.SetCurrent, dk.Current = true, p.entries[newCur].ref.SendID
		}
		if e == p.rnx {
			if newRNext = p.pickRNext(e); newRNext < 0 {
				return false
			}
			dk.SetRNext, dk.RNext = true, p.entries[newRNext].ref.RecvID
		}
	}
	p.sp.Ops = append(p.sp.Ops, Op{Kind: OpDel, Why: why, Del: dk})
	en.present = false
	if newCur >= 0 {
		p.cur = newCur
	}
	if newRNext >= 0 {
		p.rnx = newRNext
	}
	return true
}

func (p *planner) sendable(e int) bool {
	en := &p.entries[e]
	return en.present && en.d >= 0 && !p.d.Keys[en.d].AcceptOnly
}

// pickCurrent chooses a Current_key other than exclude: the wanted one, else
// the first desired sendable key, else (as a last resort that keeps the
// session up) any present key that is not revoked. seenOnly restricts the
// choice to keys the peer was seen to hold.
func (p *planner) pickCurrent(exclude int, seenOnly bool) int {
	want := p.d.WantCurrent
	first, spare := -1, -1
	for i := range p.entries {
		if i == exclude || !p.entries[i].present || seenOnly && !p.entries[i].seen {
			continue
		}
		if p.sendable(i) {
			if want.Valid && p.entries[i].ref.SendID == want.ID {
				return i
			}
			if first < 0 {
				first = i
			}
		} else if spare < 0 && !p.entries[i].revoked {
			spare = i
		}
	}
	if first >= 0 {
		return first
	}
	return spare
}

// pickRNext chooses an RNext_key other than exclude, like pickCurrent; any
// desired key may be announced.
func (p *planner) pickRNext(exclude int) int {
	want := p.d.WantRNext
	first, spare := -1, -1
	for i := range p.entries {
		en := &p.entries[i]
		if i == exclude || !en.present {
			continue
		}
		if en.d >= 0 {
			if want.Valid && en.ref.RecvID == want.ID {
				return i
			}
			if first < 0 {
				first = i
			}
		} else if spare < 0 && !en.revoked {
			spare = i
		}
	}
	if first >= 0 {
		return first
	}
	return spare
}

func (p *planner) emitInfo(o Observed) {
	op := Op{Kind: OpSetInfo}
	var whys []Reason
	if !p.listen {
		target := p.rnx
		if t := p.pickRNext(-1); t >= 0 && p.entries[t].d >= 0 {
			wanted := p.d.WantRNext.Valid && p.entries[t].ref.RecvID == p.d.WantRNext.ID
			if wanted || p.rnx < 0 || p.entries[p.rnx].d < 0 {
				target = t
			}
		}
		if target >= 0 && target != p.rnx {
			op.RNext = ID(p.entries[target].ref.RecvID)
			p.rnx = target
			whys = append(whys, ReasonRNext)
		}
		// Current_key: leave a desired sendable key alone, whoever chose
		// it; a stale one waits for the roll (deferred below).
		if p.cur < 0 || (p.entries[p.cur].d >= 0 && !p.sendable(p.cur)) {
			if t := p.pickCurrent(-1, false); t >= 0 && p.sendable(t) && t != p.cur {
				op.Current = ID(p.entries[t].ref.SendID)
				p.cur = t
				whys = append(whys, ReasonCurrent)
			}
		}
	}
	have := o.HaveAO && o.Info.AORequired
	if have != p.d.AORequired {
		op.SetRequired, op.AORequired = true, p.d.AORequired
		whys = append(whys, ReasonRequired)
	}
	if len(whys) == 0 {
		return
	}
	op.Why = whys[0]
	p.sp.Ops = append(p.sp.Ops, op)
}

func (p *planner) emitDeletes() {
	for e := range p.entries {
		en := &p.entries[e]
		if !en.present || en.d >= 0 || en.held || en.frozen {
			continue
		}
		if en.foreign {
			p.sp.Kept = append(p.sp.Kept, Held{Ref: en.ref, Why: ReasonForeign,
				Detail: "installed by another agent, not aokeyd: kept (aoctl adopt hands it to aokeyd)"})
			continue
		}
		why := ReasonStale
		if en.revoked {
			why = ReasonRevoked
		}
		if p.del(e, why, en.revoked) {
			continue
		}
		switch {
		case en.revoked:
			p.sp.Blocked = append(p.sp.Blocked, Held{Ref: en.ref, Why: ReasonNoReplace,
				Detail: "revoked key is in use and no other usable key is installed"})
		case !p.listen && p.d.WantRNext.Valid:
			p.sp.Deferred = append(p.sp.Deferred, Held{Ref: en.ref, Why: ReasonInUse,
				Detail: "stale key is still in use (current, rnext, or the peer sent with it): removed after the roll"})
		default:
			p.sp.Kept = append(p.sp.Kept, Held{Ref: en.ref, Why: ReasonCarried,
				Detail: "no longer desired (lifetime ended, or gone from the key source) but it carries a session: kept until a successor key takes over or an operator revokes it"})
		}
	}
}
