package rotator

import (
	"fmt"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// sawNewKey reads the new key's pkt_good for the retire step's proof that
// the peer sends with it after the grace period: the first read sets the
// base (graceBase), a later one above it sets graceSent.
func (m *machine) sawNewKey(obs *Observed) bool {
	k := findRecv(obs, m.desired.WantRNext.ID)
	switch {
	case k != nil && m.graceBase && k.PktGood > m.graceGood:
		m.graceSent = true
	case k != nil && !m.graceBase:
		m.graceGood, m.graceBase = k.PktGood, true
	}
	return m.graceSent
}

// awaitingNewKey: a retire step read the new key's base count and waits
// for the peer's segment with it (sawNewKey); its polls read without
// fingerprints (see retire).
func (m *machine) awaitingNewKey() bool { return m.graceBase && !m.graceSent }

// awaitNewKey polls again for sawNewKey, paced by the peer's segments
// (segpace.go).
func (m *machine) awaitNewKey(now time.Time) time.Time {
	m.st.NextAction, m.st.NextAt = fmt.Sprintf("wait for the peer to send with key recv=%d", m.desired.WantRNext.ID), m.waitNext(now, time.Time{})
	return m.st.NextAt
}

func (m *machine) toGrace(now time.Time, obs *Observed) time.Time {
	m.oldGood = make(GoodCounts, len(obs.Keys))
	m.oldGood.Note(obs)
	m.graceGood, m.graceBase, m.graceSent = 0, false, !m.desired.WantRNext.Valid
	at := now.Add(m.cfg.Grace)
	m.enter(StateGrace, now, "delete old keys after the grace period once their pkt_good stops rising", at)
	return at
}

func (m *machine) retire(now time.Time, obs *Observed) time.Time {
	if now.Before(m.st.Since.Add(m.cfg.Grace)) {
		return m.st.Since.Add(m.cfg.Grace)
	}
	if obs.Bare {
		// A poll of the wait below (awaitingNewKey). Once the peer sent with
		// the new key, the socket is read again in full and the step
		// goes on from that read, as one step (the model's retire).
		if !m.sawNewKey(obs) {
			return m.awaitNewKey(now)
		}
		// The wait is over: its probe ends in the read's borrow.
		full, err := m.readDroppingProbe(now)
		if err != nil {
			m.st.LastError = err.Error()
			return now.Add(m.cfg.Poll)
		}
		*obs = full
	}
	m.settledOn(obs)
	sp := PlanSocket(*m.desired, *obs)
	m.editsFrom(sp)
	m.noteEdits(sp, false)
	// The old keys the peer sent with are in use by the never-strand
	// rule: the plan defers them (those that are neither Current_key nor
	// RNext_key are the ones to retire), and they go only once this step
	// proves the peer moved off them, by a plan that names them in
	// Desired.Retire. Stale keys the peer never sent with go in any plan.
	// A revoked key the peer sent with goes the same way: the plan
	// deletes it, and this step waits for the same proof first.
	rp := RetireProof(sp, m.oldGood, *obs)
	// The peer's Current_key follows our RNext only once a segment of
	// ours reaches it; a segment of ours from before the announce may
	// even move it back. Before an old key the peer sent with goes, the
	// peer must be seen sending with the new key after the grace period
	// (its pkt_good read at the first retire step, then rising), however
	// long the grace period was: the peer's BGP keepalives may come
	// further apart. A Current_key switched by the peer's RNext, or a
	// segment with the new key during the switch, proves only that the
	// peer holds the new key.
	if rp.Used && !m.graceSent && !m.sawNewKey(obs) {
		return m.awaitNewKey(now)
	}
	m.oldGood.Note(obs)
	if rp.Rising {
		m.st.NextAction, m.st.NextAt = "old key's pkt_good still rising: wait", now.Add(m.cfg.Poll)
		return m.st.NextAt
	}
	d := *m.desired
	if len(rp.Retire) > 0 {
		d.Retire = rp.Retire
		sp = PlanSocket(d, *obs)
	}
	if !sp.Empty() {
		var o2 Observed
		read := false
		ae := m.guarded(StepRetire, func() error {
			var err error
			read, err = m.writeRead(now, ReadFull, &o2, func(s tcpao.Socket) error { _, err := applyOps(s, sp.Ops, false); return err }, nil)
			return err
		})
		if setsCurrentOrRNext(sp.Ops) {
			m.ownWrite(now)
		}
		if ae != nil {
			ae.Detail = "retire failed"
			return m.abort(now, ae)
		}
		m.noteEdits(sp, true)
		if read {
			m.settledOn(&o2)
			sp = PlanSocket(d, o2)
			m.st.Current, m.st.RNext = curOf(&o2)
			// What is kept is what the socket holds now: a warning (and
			// its aokeyd_keys_kept series) for a key this step retired
			// ends with it, not at the next steady read.
			m.keptFrom(&o2)
			m.editsFrom(sp)
			m.noteEdits(sp, false)
		}
	}
	m.st.Deferred = len(sp.Deferred)
	if len(sp.Deferred) > 0 {
		m.st.NextAction, m.st.NextAt = "peer still uses an old key (its RNext keeps it current): wait", now.Add(m.cfg.Poll)
		return m.st.NextAt
	}
	m.st.Rolls++
	m.st.Attempts = 0
	m.st.HavePending = false
	m.st.LastError = ""
	m.log.Info("rotator: roll complete", "peer", m.st.Peer, "current", m.st.Current, "rolls", m.st.Rolls)
	m.attemptStarts(now)
	m.attempting = false
	m.emit(EventRollCompleted, now, m.st.State, AbortNone)
	if unsettled(sp) {
		m.enter(StateSteady, now, "wait for the peer's choice of key: an edit in place waits for it", now.Add(m.cfg.Poll))
		return m.st.NextAt
	}
	m.enter(StateSteady, now, "watch", m.steadyAt(now))
	return m.st.NextAt
}

// GoodCounts are keys' pkt_good as last read, by each key's reference as
// the kernel reports it: the base RetireProof compares a read against.
type GoodCounts map[tcpao.KeyRef]uint64

// Note sets each key of o to its count in o; a key o does not hold keeps
// the count it had.
func (c GoodCounts) Note(o *Observed) {
	for _, k := range o.Keys {
		c[k.KeyRef] = k.PktGood
	}
}

// Retirement is what one full read of an established socket proves of the
// old keys a plan of it removes or defers (RetireProof).
type Retirement struct {
	// Retire are the deferred keys that are neither Current_key nor
	// RNext_key: the ones a plan may delete once the proof holds, by
	// naming them in Desired.Retire (the never-strand rule keeps them
	// otherwise: the peer sent with them).
	Retire []tcpao.KeyRef
	// Used: the peer sent with one of the old keys (pkt_good above zero).
	// Before they go, the peer must be seen sending with a key it is
	// meant to use (the machine: the new key, after the grace period).
	Used bool
	// Rising: one of the old keys verified a segment since the base: the
	// peer may still send with it, and none of them goes.
	Rising bool
}

// Proven reports whether the old keys may go, given whether the peer was
// seen sending with a key it is meant to use.
func (r Retirement) Proven(sawNew bool) bool { return !r.Rising && (!r.Used || sawNew) }

// RetireProof is the retire step's proof over sp, a plan of the socket
// now (PlanSocket): which of the keys sp defers may go once the peer is
// proved to have moved off them, whether the peer sent with any of the
// keys sp deletes or defers, and whether one of them verified a segment
// since prev (a key prev lacks counts from zero: with no base, a key the
// peer sent with is rising). It is pure: machine.retire calls it on each
// full read after the grace period, and a speaker that keys its own
// sockets (internal/birdnative) on each read of its session.
func RetireProof(sp SocketPlan, prev GoodCounts, now Observed) Retirement {
	var r Retirement
	gone := func(ref tcpao.KeyRef, deferred bool) {
		ref = normRef(ref)
		for _, k := range now.Keys {
			if k.KeyRef != ref || deferred && (k.IsCurrent || k.IsRNext) {
				continue
			}
			if deferred {
				r.Retire = append(r.Retire, k.KeyRef)
			}
			r.Rising = r.Rising || k.PktGood > prev[k.KeyRef]
			r.Used = r.Used || k.PktGood > 0
		}
	}
	for _, op := range sp.Ops {
		if op.Kind == OpDel {
			gone(op.Del.KeyRef, false)
		}
	}
	for _, h := range sp.Deferred {
		gone(h.Ref, true)
	}
	return r
}

// keptFrom records in the status the keys of obs that carry the session
// but are not desired (nor revoked: those go).
func (m *machine) keptFrom(obs *Observed) {
	var kept []Held
	for _, r := range CarriedKeys(*obs) {
		if m.desires(r) || slices.ContainsFunc(m.desired.Revoked, func(x RevokedKey) bool { return sameSessionKey(normRef(x.KeyRef), normRef(r)) }) {
			continue
		}
		kept = append(kept, Held{Ref: r, Why: ReasonCarried,
			Detail: "no longer desired (lifetime ended, or gone from the key source) but it carries the session: kept"})
	}
	m.carried = kept
	m.setKept()
}

// desires reports whether the desired state lists r (by IDs, L3 device
// and overlapping prefix, as on an established socket).
func (m *machine) desires(r tcpao.KeyRef) bool {
	r = normRef(r)
	return slices.ContainsFunc(m.desired.Keys, func(k DesiredKey) bool { return sameSessionKey(normRef(k.KeyRef), r) })
}

// editsFrom records in the status what a full plan holds back: edits,
// foreign keys and the desired keys a foreign key blocks.
func (m *machine) editsFrom(sp SocketPlan) {
	var e []Held
	for _, h := range sp.Kept {
		if h.Why == ReasonEdited || h.Why == ReasonForeign {
			e = append(e, h)
		}
	}
	for _, h := range sp.Blocked {
		if h.Why == ReasonForeignClash {
			e = append(e, h) // the desired key not added: the roll waits
		}
	}
	m.edits = e
	m.setKept()
}

// setKept publishes carried and edits as Status.Kept; a status that says
// the same keeps its slice (published slices are never modified).
func (m *machine) setKept() {
	kept := slices.Concat(m.carried, m.edits)
	if !slices.EqualFunc(kept, m.st.Kept, func(a, b Held) bool { return a.Ref == b.Ref && a.Why == b.Why }) {
		m.st.Kept = kept
	}
}
