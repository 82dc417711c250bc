package daemon

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// An early roll is an operator's `aoctl rotate PEER`: roll the peer now to
// the newest key the key source holds for it, ahead of that key's send
// start. What an operator expects of it, and what the daemon does:
//
//   - The roll goes to the key that was newest when they asked (the
//     target, named by chain, name, IDs and material), once. A key added
//     later is rolled to when the schedule reaches it, or when they ask
//     again; never because it happens to be newest now.
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
//     reports that roll failed too); when the peer left the policy.
//
// The requests live in memory: a restart forgets them, and the schedule
// governs.

// earlyState is where a request stands.
type earlyState uint8

const (
	earlyRolling earlyState = iota // asked: the roll to the target has not completed
	earlyHeld                      // the roll completed: the peer sends with the target ahead of its start
)

// earlyRoll is one peer's request: its target as the key source had it
// when the operator asked.
type earlyRoll struct {
	chain, name string // the source chain and the key's name in it
	send, recv  uint8
	mat         material
	start       time.Time // the target's send start (the policy's)
	asked       time.Time
	state       earlyState
}

// label names the target, CHAIN/NAME.
func (r earlyRoll) label() string { return r.chain + "/" + r.name }

// index is the target's index in pk.Keys; why, when it is not there,
// says why not.
func (r earlyRoll) index(pk policy.PeerKeys) (i int, why string) {
	if pk.SourceChain != r.chain {
		return -1, fmt.Sprintf("the peer's key chain is %s now", pk.SourceChain)
	}
	for i, k := range pk.Keys {
		if k.MKT.Name != r.name {
			continue
		}
		if k.MKT.SendID != r.send || k.MKT.RecvID != r.recv || materialOf(&k.MKT) != r.mat {
			return -1, "its IDs or material changed in the key source"
		}
		return i, ""
	}
	if slices.Contains(pk.Revoked, r.name) {
		return -1, "it was revoked"
	}
	return -1, "it is no longer one of the peer's keys in the key source"
}

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
	mu sync.Mutex
	// gen changes with every request and every end: a pass input, so that
	// the next pass recomputes each peer's desired state.
	gen   uint64
	rolls map[rotator.PeerID]earlyRoll
	ended map[rotator.PeerID]earlyEnd
}

// ask records the operator's request for id, replacing any other one. A
// request for the same target stays as it is; ask returns it then.
func (e *earlyRolls) ask(id rotator.PeerID, r earlyRoll) (same earlyRoll, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.rolls[id]; ok && old.chain == r.chain && old.name == r.name && old.send == r.send &&
		old.recv == r.recv && old.mat == r.mat {
		return old, true
	}
	if e.rolls == nil {
		e.rolls = map[rotator.PeerID]earlyRoll{}
	}
	e.rolls[id] = r
	delete(e.ended, id)
	e.gen++
	return earlyRoll{}, false
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

// in is the index in pk.Keys of the key the request has its peer send
// with: its target, while the target is one of pk's keys and the schedule
// has not reached it. Otherwise it is -1 and why says why not; caughtUp
// when the schedule did reach it (its preferred key is the target, or one
// that starts sending no earlier).
func (r earlyRoll) in(pk policy.PeerKeys) (i int, why string, caughtUp bool) {
	i, why = r.index(pk)
	switch {
	case i < 0:
		return -1, why, false
	case i == pk.Preferred:
		return -1, "the schedule sends with it now", true
	case pk.Preferred >= 0 && !pk.Keys[pk.Preferred].SendLifetime.Start.Before(pk.Keys[i].SendLifetime.Start):
		return -1, "the schedule sends with " + pk.Keys[pk.Preferred].MKT.Name + ", which starts no earlier", true
	}
	return i, "", false
}

// prefer is the index in pk.Keys of the key id's peer is to send with:
// its request's target while the request applies (earlyRoll.in), else the
// schedule's preferred key.
func (e *earlyRolls) prefer(id rotator.PeerID, pk policy.PeerKeys) int {
	if r, ok := e.get(id); ok {
		if i, _, _ := r.in(pk); i >= 0 {
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
	i, why, caughtUp := r.in(pk)
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
	if !ok || ev.WantCurrent != rotator.ID(r.send) || ev.WantRNext != rotator.ID(r.recv) {
		return earlyRoll{}, "", false // no request, or another roll
	}
	if ev.Kind == rotator.EventRollCompleted {
		e.mu.Lock()
		if cur, ok := e.rolls[ev.Peer]; ok && cur == r {
			cur.state = earlyHeld
			e.rolls[ev.Peer] = cur
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
	}
	delete(e.ended, id)
}

// view is id's request in force, or the last that ended before the
// schedule reached its target while that start is still ahead.
func (e *earlyRolls) view(id rotator.PeerID, now time.Time) (r earlyRoll, inForce bool, end earlyEnd, ended bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.rolls[id]; ok {
		return r, true, earlyEnd{}, false
	}
	if en, ok := e.ended[id]; ok && (en.roll.start.IsZero() || now.Before(en.roll.start)) {
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
	return &control.EarlyRoll{Key: control.KeyName{Chain: r.chain, Name: r.name, SendID: r.send, RecvID: r.recv},
		KeyStart: r.start, AskedAt: r.asked, State: state}
}

// newest is the index of the key an aoctl rotate rolls to: the one with
// the latest send start whose send lifetime has not ended at now (ties go
// to the schedule's preferred key); -1 when there is none.
func newest(pk policy.PeerKeys, now time.Time) int {
	best := -1
	for i, k := range pk.Keys {
		if end := k.SendLifetime.End; !end.IsZero() && !now.Before(end) {
			continue // sent with no more: nothing to roll to ahead of time
		}
		if best < 0 {
			best = i
			continue
		}
		switch k.SendLifetime.Start.Compare(pk.Keys[best].SendLifetime.Start) {
		case 1:
			best = i
		case 0:
			if i == pk.Preferred {
				best = i
			}
		}
	}
	return best
}

// earlyRollOf is the request for pk's key i asked at now.
func earlyRollOf(pk policy.PeerKeys, i int, now time.Time) earlyRoll {
	k := pk.Keys[i]
	return earlyRoll{chain: pk.SourceChain, name: k.MKT.Name, send: k.MKT.SendID, recv: k.MKT.RecvID,
		mat: materialOf(&k.MKT), start: k.SendLifetime.Start, asked: now}
}
