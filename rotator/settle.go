package rotator

import (
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// What a machine knows of the edits in place on its socket (edit.go).
// Invariants:
//   - pending is true whenever the socket may hold a key under the IDs of
//     a desired key with other material: it is computed at every full
//     read, and set by every desired state that changes a key's material
//     under IDs it had; while it holds the machine reads in full
//     (fingerprints), so that it sees what an edit needs.
//   - reads counts the machine's reads while pending since since: its
//     own last write of Current_key or RNext_key, its start, or the read
//     that found the edit pending. The base (good, the socket's pkt_good)
//     is taken at a read that is at least the second and at least two
//     polls after since: the network's delay is shorter than a poll, so
//     our segments in flight at that write have reached the peer a poll
//     after it, and the peer's segments in flight then have reached us
//     a poll later (roll.pml's cr counts the two reads; a read that a
//     wake-up brings sooner than a poll is no such read). Observed.Settled
//     is pkt_good above the base at a later read: a segment the peer sent
//     after it saw our RNext, whose RNext Current_key follows. Any own
//     write of Current_key or RNext_key starts over; so does a read with
//     no edit pending.
//   - applied are the edits this machine's plans applied, each kept
//     while the desired state holds its material (Status.Edits with the
//     last full plan's held edits).
type settleState struct {
	pending bool
	reads   int
	since   time.Time
	good    uint64
	based   bool // good is taken
	held    []Edit
	applied []Edit
}

// countRead counts the step's first read obs, made at now, for
// Observed.Settled.
func (m *machine) countRead(obs *Observed, now time.Time) {
	s := &m.settle
	if !obs.Bare {
		s.pending = editPending(m.desired, obs)
	}
	switch {
	case !s.pending:
		s.reads, s.based, s.since = 0, false, now
	case s.reads < 2:
		s.reads++
	}
	if s.pending && s.reads == 2 && !s.based && !now.Before(s.since.Add(2*m.cfg.Poll)) {
		s.good, s.based = obs.Info.PktGood, true
	}
	m.st.SettleBase, m.st.SettleBaseSet = s.good, s.based
}

// settledOn sets obs.Settled from the base (see settleState).
func (m *machine) settledOn(obs *Observed) {
	s := &m.settle
	obs.Settled = s.pending && s.based && obs.Info.PktGood > s.good
}

// ownWrite records a write of the machine's (or an Exclusive call's), at
// now, that set Current_key or RNext_key: the peer's choice is to be seen
// again.
func (m *machine) ownWrite(now time.Time) {
	s := &m.settle
	s.reads, s.based, s.since = 0, false, now
	m.st.SettleBaseSet = false
}

// Settled is Observed.Settled for a read o of the socket a machine's
// status s is of: what a dry run of its plan (aoctl plan) gives it.
func (s *Status) Settled(o Observed) bool { return s.SettleBaseSet && o.Info.PktGood > s.SettleBase }

// setsCurrentOrRNext reports whether any of ops names a Current_key or an
// RNext_key.
func setsCurrentOrRNext(ops []Op) bool {
	for i := range ops {
		o := &ops[i]
		if opsMoveCurrent(ops[i:i+1]) || o.Kind == OpAdd && o.Add.SetRNext || o.Kind == OpDel && o.Del.SetRNext ||
			o.Kind == OpSetInfo && o.RNext.Valid {
			return true
		}
	}
	return false
}

// editPending reports whether obs holds a key under the IDs of one of d's
// keys (as on an established socket) with other material.
func editPending(d *Desired, obs *Observed) bool {
	for i := range d.Keys {
		dk := &d.Keys[i]
		r := normRef(dk.KeyRef)
		for j := range obs.Keys {
			if ki := &obs.Keys[j]; sameSessionKey(r, ki.KeyRef) && !sameMaterial(&dk.Key, ki) {
				return true
			}
		}
	}
	return false
}

// newDesired records a new desired state d for the edits: one that
// changes the material under IDs the old one had makes the reads full
// (pending) until a full read says otherwise, and an applied edit whose
// material d no longer holds is forgotten.
func (m *machine) newDesired(old, d *Desired) {
	s := &m.settle
	for i := range d.Keys {
		k := &d.Keys[i]
		for j := range old.Keys {
			o := &old.Keys[j]
			if o.SendID == k.SendID && o.RecvID == k.RecvID && !sameKeyMaterial(&o.Key, &k.Key) {
				s.pending = true
			}
		}
	}
	kept := slices.DeleteFunc(slices.Clone(s.applied), func(e Edit) bool { return !desiresMaterial(d, e) })
	if len(kept) != len(s.applied) {
		s.applied = kept
		m.publishEdits()
	}
}

// sameKeyMaterial reports whether a and b are the same material.
func sameKeyMaterial(a, b *tcpao.Key) bool {
	return a.Algorithm == b.Algorithm && macLen(a.MACLen) == macLen(b.MACLen) && a.ExcludeOptions == b.ExcludeOptions &&
		a.Secret.Fingerprint() == b.Secret.Fingerprint()
}

// desiresMaterial reports whether d holds e's key with e's material.
func desiresMaterial(d *Desired, e Edit) bool {
	return slices.ContainsFunc(d.Keys, func(k DesiredKey) bool {
		return k.SendID == e.Ref.SendID && k.RecvID == e.Ref.RecvID && k.Secret.Fingerprint() == e.FP
	})
}

// noteEdits records a full plan's edits: those held back, and, when the
// plan's ops were applied, those it applied.
func (m *machine) noteEdits(sp SocketPlan, applied bool) {
	s := &m.settle
	var held []Edit
	for _, e := range sp.Edits {
		switch {
		case !e.Rule.Applied():
			held = append(held, e)
		case applied:
			s.applied = slices.DeleteFunc(slices.Clone(s.applied), func(x Edit) bool {
				return x.Ref.SendID == e.Ref.SendID && x.Ref.RecvID == e.Ref.RecvID
			})
			s.applied = append(s.applied, e)
			m.log.Info("rotator: edit in place applied", "peer", m.st.Peer, "key", e.Ref.String(), "rule", e.Rule.String(), "why", e.Rule.Text())
		}
	}
	s.held = held
	m.publishEdits()
}

// publishEdits sets Status.Edits (a new slice when it changes: published
// slices are never modified).
func (m *machine) publishEdits() {
	e := slices.Concat(m.settle.held, m.settle.applied)
	if !slices.Equal(e, m.st.Edits) {
		m.st.Edits = e
	}
}

// unsettled reports whether sp holds an edit back until the peer's choice
// of key is seen (EditUnsettled): the machine polls for it.
func unsettled(sp SocketPlan) bool {
	return slices.ContainsFunc(sp.Edits, func(e Edit) bool { return e.Rule == EditUnsettled })
}
