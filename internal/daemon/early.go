package daemon

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// An early roll is an operator's `aoctl rotate PEER`: roll the peer now to
// the newest key the key source holds for it, ahead of that key's send
// start. What an operator expects of it, and what the daemon does:
//
//   - The roll goes to the key that was newest when they asked (the
//     target, named by chain, name, IDs and material: early.Key),
//     once. A key added later is rolled to when the schedule reaches it,
//     or when they ask again; never because it happens to be newest now.
//   - Once the roll completed the peer keeps sending with the target until
//     the schedule reaches it: going back to the schedule's older key
//     would be a roll nobody asked for. The request is then held.
//   - The request ends, and the schedule governs again, when the
//     schedule's preferred key is the target, or one that starts sending
//     no earlier (the schedule caught up); when the target is no longer
//     one of the peer's keys in the key source (removed, revoked, its
//     material changed, its lifetimes moved it out); when its peer's key
//     chain changed; when a roll to the target aborted (the far end does
//     not take it: retrying would announce, again and again, a key the far
//     end lacks; `aoctl rotate --wait` reports the roll failed, status
//     says the request ended and why, and `aoctl rotate` asks again); when
//     the session went down before the roll completed (rotate --wait
//     reports that roll failed too; a session that went down while aokeyd
//     was stopped counts: a later session is another connection); when
//     the peer left the policy.
//
// The requests survive a restart, an upgrade and a lost file
// (earlyrecord.go): each is written to the early-roll record, durably and
// with a backup, before any pass can act on it (ask), and the record
// follows every other change (held, ended) at the next pass, at the
// latest at the stop. A start reads the record before its first pass.
// Without one it can read (both copies unreadable, or its fingerprints
// under another fingerprint key) the schedule governs every peer, with a
// warning in the log and in status: the safe side, never a refused start.

// earlyState is where a request stands.
type earlyState uint8

const (
	earlyRolling earlyState = iota // asked: the roll to the target has not completed
	earlyHeld                      // the roll completed: the peer sends with the target ahead of its start
)

// earlyRoll is one peer's request: its target as the key source had it
// when the operator asked, and the session that was up then.
type earlyRoll struct {
	key     early.Key
	asked   time.Time
	state   earlyState
	session early.Session
	// restored: read from the record at start (a roll under way began
	// before it, on a machine that is gone). Not recorded.
	restored bool
}

func (r earlyRoll) label() string { return r.key.Label() }

// earlyEnd is a request that ended before the schedule reached its
// target, kept for status until the target's send start.
type earlyEnd struct {
	roll earlyRoll
	at   time.Time
	why  string
}

// earlyRolls are the peers' early rolls, at most one per peer. Rotate
// asks, the passes read them for each peer's desired state (prefer) and
// end those the key source and the schedule left behind (stale), the
// rotator's events and the sessions going down end or hold them.
type earlyRolls struct {
	*core
	mu sync.Mutex
	// gen changes with every request and every end: a pass input, so that
	// the next pass recomputes each peer's desired state.
	gen   uint64
	rolls map[rotator.PeerID]earlyRoll
	ended map[rotator.PeerID]earlyEnd
	// changes counts the changes to rolls (a request, a hold, an end);
	// saved is the count the record holds (both under mu; saved written
	// under rec.wmu too). saved != changes: the next flush writes.
	changes, saved uint64
	// rec is the early-roll record (earlyrecord.go); nil: memory only.
	rec *earlyRecord
}

// ask makes asks the peers' requests, each replacing the peer's request
// in force, in the record and then in memory: no pass sees a request
// before the record holds it. A request for the target the peer's request
// in force names leaves that one as it is: kept holds those. With an error
// the record could not be written and no other request was made.
func (e *earlyRolls) ask(asks map[rotator.PeerID]earlyRoll) (kept map[rotator.PeerID]earlyRoll, err error) {
	if e.rec != nil {
		e.rec.wmu.Lock() // no other write between the one below and the apply
		defer e.rec.wmu.Unlock()
	}
	e.mu.Lock()
	kept = map[rotator.PeerID]earlyRoll{}
	next := maps.Clone(e.rolls)
	if next == nil {
		next = map[rotator.PeerID]earlyRoll{}
	}
	for id, r := range asks {
		if old, ok := e.rolls[id]; ok && old.key.Same(r.key) {
			kept[id] = old
			continue
		}
		next[id] = r
	}
	base := e.changes
	e.mu.Unlock()
	if len(kept) == len(asks) {
		return kept, nil
	}
	if e.rec != nil {
		if err := e.rec.write(next); err != nil {
			return kept, err
		}
		e.rec.asked()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rolls == nil {
		e.rolls = map[rotator.PeerID]earlyRoll{}
	}
	for id, r := range asks {
		if _, ok := kept[id]; !ok {
			e.rolls[id] = r
			delete(e.ended, id)
		}
	}
	e.gen++
	e.changes++
	if e.rec != nil && base == e.changes-1 {
		e.saved = e.changes // nothing else changed since next was taken
	}
	return kept, nil
}

// generation changes with every request and every end.
func (e *earlyRolls) generation() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen
}

// get is id's request in force.
func (e *earlyRolls) get(id rotator.PeerID) (earlyRoll, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.rolls[id]
	return r, ok
}

// prefer is the index in pk.Keys of the key id's peer is to send with:
// its request's target while the request applies (early.Key.In),
// else the schedule's preferred key.
func (e *earlyRolls) prefer(id rotator.PeerID, pk policy.PeerKeys) int {
	if r, ok := e.get(id); ok {
		if i, _, _ := r.key.In(pk); i >= 0 {
			return i
		}
	}
	return pk.Preferred
}

// stale ends id's request when it no longer applies to pk, and returns it
// with why ("" when it applies, or there is none). A request the schedule
// caught up with ends as it should: status is not told of it.
func (e *earlyRolls) stale(id rotator.PeerID, pk policy.PeerKeys, now time.Time) (earlyRoll, string) {
	r, ok := e.get(id)
	if !ok {
		return r, ""
	}
	i, why, caughtUp := r.key.In(pk)
	if i >= 0 {
		return r, ""
	}
	note := why
	if caughtUp {
		note = ""
	}
	if !e.end(id, r, now, note) {
		return r, "" // replaced meanwhile
	}
	return r, why
}

// event follows a roll of id's peer: a completed roll to the target
// holds the request, an aborted one ends it. It reports the request a
// roll's abort ended, if any.
func (e *earlyRolls) event(ev rotator.Event) (earlyRoll, string, bool) {
	if ev.Kind != rotator.EventRollCompleted && ev.Kind != rotator.EventRollAborted {
		return earlyRoll{}, "", false
	}
	e.mu.Lock()
	r, ok := e.rolls[ev.Peer]
	e.mu.Unlock()
	if !ok || ev.WantCurrent != rotator.ID(r.key.SendID) || ev.WantRNext != rotator.ID(r.key.RecvID) {
		return earlyRoll{}, "", false // no request, or another roll
	}
	if ev.Kind == rotator.EventRollCompleted {
		e.mu.Lock()
		if cur, ok := e.rolls[ev.Peer]; ok && cur == r && cur.state != earlyHeld {
			cur.state = earlyHeld
			e.rolls[ev.Peer] = cur
			e.changes++
		}
		e.mu.Unlock()
		return earlyRoll{}, "", false
	}
	why := fmt.Sprintf("the roll to it aborted (%s)", ev.Reason)
	return r, why, e.end(ev.Peer, r, ev.At, why)
}

// down ends id's request whose roll had not completed when the session
// went down: that roll failed. A held one stays: the peer keeps the key
// it rolled to on its next session.
func (e *earlyRolls) down(id rotator.PeerID, at time.Time) (earlyRoll, bool) {
	r, ok := e.get(id)
	if !ok || r.state != earlyRolling {
		return r, false
	}
	return r, e.end(id, r, at, "the session went down before the roll to it completed")
}

// observe follows a roll the machine does not run as one: a machine that
// started on a session mid-roll (aokeyd restarted after the roll
// announced the target) finds RNext_key on the target and stays steady,
// and the session switches when the peer's RNext asks for the target (the
// kernel's switch), with no event. So, while st (the machine's status,
// asked for only when id has a request rolling) is steady: a session
// that sends with the target and announces it holds the request, as a
// completed roll does; for a restored request, one that does not, timeout
// after the request was asked (the switch timeout: the roll would have
// aborted by then), ends it, as the abort does (a request asked since the
// start has its roll on this machine, whose abort ends it). It reports
// the request it held or ended, and why it ended.
func (e *earlyRolls) observe(id rotator.PeerID, status func() (rotator.Status, bool), now time.Time, timeout time.Duration) (r earlyRoll, why string, held, ended bool) {
	r, ok := e.get(id)
	if !ok || r.state != earlyRolling {
		return r, "", false, false
	}
	st, ok := status()
	if !ok || st.State != rotator.StateSteady {
		return r, "", false, false
	}
	if st.Current == rotator.ID(r.key.SendID) && st.RNext == rotator.ID(r.key.RecvID) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if cur, ok := e.rolls[id]; ok && cur == r {
			cur.state = earlyHeld
			e.rolls[id] = cur
			e.changes++
			return cur, "", true, false
		}
		return r, "", false, false
	}
	if !r.restored || now.Before(r.asked.Add(timeout)) {
		return r, "", false, false
	}
	why = fmt.Sprintf("the roll to it did not complete within the switch timeout (%s)", timeout)
	return r, why, false, e.end(id, r, now, why)
}

// deadline is the earliest instant after now at which observe would end
// a restored request still rolling (zero: none).
func (e *earlyRolls) deadline(now time.Time, timeout time.Duration) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var next time.Time
	for _, r := range e.rolls {
		if at := r.asked.Add(timeout); r.restored && r.state == earlyRolling && at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// session ends id's request whose roll had not completed when its
// session is not s, a session being taken over: the one the roll ran on
// went down (while aokeyd was stopped, or unseen), and with it the roll.
// A request that names no session, or a session not named, stays.
func (e *earlyRolls) session(id rotator.PeerID, s early.Session, at time.Time) (earlyRoll, bool) {
	r, ok := e.get(id)
	if !ok || r.state != earlyRolling || r.session.IsZero() || s.IsZero() || r.session == s {
		return r, false
	}
	return r, e.end(id, r, at, "the session went down before the roll to it completed")
}

// end ends id's request r (unless another one replaced it meanwhile);
// why, when not empty, is kept for status.
func (e *earlyRolls) end(id rotator.PeerID, r earlyRoll, at time.Time, why string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.rolls[id]; !ok || cur != r {
		return false
	}
	delete(e.rolls, id)
	e.gen++
	e.changes++
	if why != "" {
		if e.ended == nil {
			e.ended = map[rotator.PeerID]earlyEnd{}
		}
		e.ended[id] = earlyEnd{roll: r, at: at, why: why}
	}
	return true
}

// forget drops a peer that left the policy.
func (e *earlyRolls) forget(id rotator.PeerID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.rolls[id]; ok {
		delete(e.rolls, id)
		e.gen++
		e.changes++
	}
	delete(e.ended, id)
}

// peers are the peers that have a request in force.
func (e *earlyRolls) peers() []rotator.PeerID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Keys(e.rolls))
}

// view is id's request in force, or the last that ended before the
// schedule reached its target while that start is still ahead.
func (e *earlyRolls) view(id rotator.PeerID, now time.Time) (r earlyRoll, inForce bool, end earlyEnd, ended bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.rolls[id]; ok {
		return r, true, earlyEnd{}, false
	}
	if en, ok := e.ended[id]; ok && (en.roll.key.Start.IsZero() || now.Before(en.roll.key.Start)) {
		return earlyRoll{}, false, en, true
	}
	return earlyRoll{}, false, earlyEnd{}, false
}

// status is id's request in force for status, or the last one that ended
// before the schedule reached its target while that target's send start
// is ahead; nil when there is neither.
func (e *earlyRolls) status(id rotator.PeerID, now time.Time) *control.EarlyRoll {
	r, inForce, end, ended := e.view(id, now)
	switch {
	case inForce:
		st := control.EarlyRolling
		if r.state == earlyHeld {
			st = control.EarlyHeld
		}
		return r.status(st)
	case ended:
		s := end.roll.status(control.EarlyEnded)
		s.EndedAt, s.Ended = end.at, end.why
		return s
	}
	return nil
}

func (r earlyRoll) status(state string) *control.EarlyRoll {
	k := r.key
	return &control.EarlyRoll{Key: control.KeyName{Chain: k.Chain, Name: k.Name, SendID: k.SendID, RecvID: k.RecvID},
		KeyStart: k.Start, AskedAt: r.asked, State: state}
}
