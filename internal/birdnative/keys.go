package birdnative

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ids is a key's SendID and RecvID.
type ids [2]uint8

func idsOf(k bird.Key) ids { return ids{k.SendID, k.RecvID} }

// session is what the kernel shows of BIRD's established socket with the
// peer: each key's pkt_good now and at the previous pass (before nil:
// no previous read of this session), its Current_key, and this read and
// the previous one (base) as the next read's base (sessionOf).
type session struct {
	good, before map[ids]uint64
	current      ids
	hasCurrent   bool
	read, base   sessionRead
}

// settled reports whether the base read found pref RNext_key, as every
// read had since one settleAfter (two network delays) before it: our
// segments that asked the peer for another key were sent before that
// first read and landed within a delay, and the peer's segments signed
// before it followed the last of them landed within another, so every
// segment verified since the base was signed with the peer's Current_key
// for good (the machine's graceSent, after its wait; exec.pml's XSENT,
// where two reads in a row stand for the two delays).
func (s *session) settled(pref ids) bool {
	return s.before != nil && s.base.hasRNext && s.base.rnext == pref && s.base.at.Sub(s.base.since) >= settleAfter
}

// rising reports whether the peer sent with key id since the last pass.
func (s *session) rising(id ids) bool { return s.good[id] > s.before[id] }

// input is one peer's planning input. The secrets of Desired and Written
// are borrowed: planPeer copies none of them.
type input struct {
	Desired   []policy.ScheduledKey
	Preferred int // index into Desired, -1: no key may be sent with
	// Written is the peer's include file as it is now (nil: none yet).
	Written []bird.Key
	// Revoked are IDs an operator revoked (or the policy expired with
	// on_key_expiry: remove): they leave the file even in use.
	Revoked []ids
	// Session is nil while no session is established, or when it could
	// not be read (Unread says why).
	Session *session
	// Unread: BIRD's sessions could not be read from the kernel (its
	// process not found, its socket not borrowed): a key no longer desired
	// is kept, as for a session up, and the reason names this, not "no
	// session".
	Unread error
}

// kept is a key planPeer keeps against the desired state, and why.
type kept struct {
	ID     ids
	Reason keptReason
	Why    string // the reason in words, for status
}

// keptReason is why planPeer keeps a key.
type keptReason uint8

const (
	keptEdited     keptReason = iota + 1 // new material under its IDs, held back
	keptUnread                           // no longer desired; BIRD's session could not be read
	keptNoSession                        // no longer desired; no session is up (the next reconnect may need it)
	keptInUse                            // no longer desired; the peer may still send with it
	keptNoSendable                       // no key may be sent with now: BIRD keeps sending with it
)

// plan is one peer's key list for BIRD.
type plan struct {
	Keys []bird.Key
	Kept []kept
	// Disabled: every key was revoked and none is left: the protocol is
	// disabled (the session goes down, as a revoke of the only key resets
	// a borrowed socket's session) until a key comes.
	Disabled bool
	// Err: no key list BIRD would take (none to send with); the file is
	// left as it is.
	Err error
}

// checkKeys says which desired keys BIRD cannot hold (bird.Check).
func checkKeys(ks []policy.ScheduledKey) []error {
	var out []error
	for _, k := range ks {
		tk := tcpao.Key{Algorithm: k.MKT.Algorithm, MACLen: k.MKT.MACLen, ExcludeOptions: !k.IncludeTCPOptions}
		if err := bird.Check(tk); err != nil {
			out = append(out, fmt.Errorf("key %s: %w", k.MKT.Name, err))
		}
	}
	return out
}

// fileSocket names the neighbor's file in the planner's plans.
const fileSocket rotator.SocketID = "bird file"

// anyPeer is the peer prefix of every key of a file as the planner sees
// it: BIRD's protocol has one neighbor, and its keys carry no prefix.
var anyPeer = netip.PrefixFrom(netip.IPv4Unspecified(), 0)

func refOf(id ids) tcpao.KeyRef { return tcpao.KeyRef{Peer: anyPeer, SendID: id[0], RecvID: id[1]} }

func idsOfRef(r tcpao.KeyRef) ids { return ids{r.SendID, r.RecvID} }

func schedIDs(k policy.ScheduledKey) ids { return ids{k.MKT.SendID, k.MKT.RecvID} }

// desiredIndex is the index of the desired key with IDs id, -1 none.
func desiredIndex(ks []policy.ScheduledKey, id ids) int {
	return slices.IndexFunc(ks, func(k policy.ScheduledKey) bool { return schedIDs(k) == id })
}

// planPeer is the never-strand rule for a speaker aokeyd drives through
// its configuration, computed by the rotator's planner: the file is
// planned as a socket (fileAsSocket) by rotator.PlanSocket, and a key the
// peer sent with leaves it only by the rotator's retire proof
// (rotator.RetireProof) or a revoke: the one retire rule, which
// rotator/model/roll.pml's executor end (-DEXECEND) checks. The desired
// keys are written, the preferred one preferred and the accept-only ones
// deprecated; a key no longer desired stays (deprecated) while no session
// is up (the next reconnect may need it) and until the peer was seen
// sending with a desired key; then, one the peer sent with, and the key
// BIRD's session sends with, until the peer sent with the preferred key
// since a settled read (session.settled) and no old key's pkt_good rose
// since; a revoked key leaves at once. New material under the IDs of a
// written key is held back (BIRD would swap it under the session).
func planPeer(in input) plan {
	fs := fileAsSocket(in)
	sp := rotator.PlanSocket(fs.d, fs.o)
	if fs.session {
		// The peer was seen sending with a desired key. The retire proof:
		// it sent with the preferred key since a settled read, and no old
		// key verified a segment since.
		if rp := rotator.RetireProof(sp, fs.prev, fs.o); rp.Proven(fs.sawNew) && len(rp.Retire) > 0 {
			fs.d.Retire = rp.Retire
			sp = rotator.PlanSocket(fs.d, fs.o)
		}
	}
	for _, h := range sp.Blocked {
		if h.Why == rotator.ReasonInvalid {
			return plan{Err: fmt.Errorf("the desired keys cannot be planned (%s): the peer's file is left as it is", h.Detail)}
		}
	}
	return fs.keys(in, sp)
}

// fileSocketIn is one peer's file as the planner's socket.
type fileSocketIn struct {
	d rotator.Desired
	o rotator.Observed
	// session: planned as BIRD's established session (Established, each
	// key's pkt_good from it); else as a listener that every written key
	// carries (Listening, Carried), so that none but a revoked one goes.
	session bool
	prev    rotator.GoodCounts // the session's counts at the previous read
	// sawNew: the peer sent with the preferred key since the previous
	// read, which was settled (session.settled).
	sawNew  bool
	pref    int   // index into in.Desired of the key preferred, -1 none
	revoked []ids // written keys that leave whatever
}

// fileAsSocket is the file as a socket: its keys are the written ones,
// its RNext_key its preferred key (BIRD asks the peer for it, and names
// it as the backup of a Current_key it deletes), its Current_key and each
// key's pkt_good what the kernel shows of BIRD's session with the peer
// (the key BIRD sends with follows the peer's RNext). Without a session
// read, or before the peer was seen sending with a desired key, which key
// it sends with is unknown: the file is then a listener whose every key
// carries a session.
func fileAsSocket(in input) fileSocketIn {
	fs := fileSocketIn{d: rotator.Desired{Socket: fileSocket, Kind: rotator.Established}, o: rotator.Observed{HaveAO: true}, pref: in.Preferred}
	writtenPref := slices.IndexFunc(in.Written, func(w bird.Key) bool { return w.Preferred })
	desired := func(id ids) int { return desiredIndex(in.Desired, id) }
	if fs.pref < 0 && writtenPref >= 0 {
		// No key may be sent with now: BIRD keeps sending with the key
		// written preferred.
		fs.pref = desired(idsOf(in.Written[writtenPref]))
	}
	seen := false
	for i, k := range in.Desired {
		id := schedIDs(k)
		fs.d.Keys = append(fs.d.Keys, rotator.DesiredKey{
			Key:        tcpao.Key{KeyRef: refOf(id), Algorithm: k.MKT.Algorithm, Secret: k.MKT.Secret},
			AcceptOnly: !k.Sendable && i != fs.pref})
		seen = seen || in.Session != nil && in.Session.good[id] > 0
	}
	// RNext_key: the key this plan prefers (BIRD sets RNext_key to it at
	// the configure), else the key written preferred.
	cur, haveCur := ids{}, false
	switch {
	case fs.pref >= 0:
		cur, haveCur = schedIDs(in.Desired[fs.pref]), true
		fs.d.WantCurrent, fs.d.WantRNext = rotator.ID(cur[0]), rotator.ID(cur[1])
	case writtenPref >= 0:
		cur, haveCur = idsOf(in.Written[writtenPref]), true
	}
	fs.session = in.Unread == nil && in.Session != nil && seen
	if fs.session {
		fs.prev = rotator.GoodCounts{}
		for id, n := range in.Session.before {
			fs.prev[refOf(id)] = n
		}
		fs.sawNew = haveCur && in.Session.settled(cur) && in.Session.rising(cur)
	} else {
		fs.d.Kind = rotator.Listening
	}
	for _, w := range in.Written {
		id := idsOf(w)
		ki := tcpao.KeyInfo{KeyRef: refOf(id), Algorithm: w.Algorithm, Fingerprint: w.Secret.Fingerprint(), IsRNext: haveCur && id == cur}
		if fs.session {
			ki.PktGood = in.Session.good[id]
			ki.IsCurrent = in.Session.hasCurrent && id == in.Session.current
		} else {
			fs.o.Carried = append(fs.o.Carried, ki.KeyRef)
		}
		if slices.Contains(in.Revoked, id) && desired(id) < 0 {
			fs.revoked = append(fs.revoked, id)
			fs.d.Revoked = append(fs.d.Revoked, rotator.RevokedKey{KeyRef: ki.KeyRef, Fingerprint: ki.Fingerprint})
		}
		fs.o.Keys = append(fs.o.Keys, ki)
	}
	return fs
}

// keys is the file sp leaves: the written keys with sp's deletes and adds
// applied (a revoked key leaves even where the planner found no key to
// name in its place: BIRD names its own), each flagged as BIRD takes it.
func (fs fileSocketIn) keys(in input, sp rotator.SocketPlan) plan {
	var p plan
	final := slices.Clone(in.Written)
	for _, op := range sp.Ops {
		switch op.Kind {
		case rotator.OpDel:
			id := idsOfRef(op.Del.KeyRef)
			final = slices.DeleteFunc(final, func(k bird.Key) bool { return idsOf(k) == id })
		case rotator.OpAdd:
			d := in.Desired[desiredIndex(in.Desired, idsOfRef(op.Key.KeyRef))]
			final = append(final, bird.Key{SendID: d.MKT.SendID, RecvID: d.MKT.RecvID, Algorithm: d.MKT.Algorithm, Secret: d.MKT.Secret})
		}
	}
	final = slices.DeleteFunc(final, func(k bird.Key) bool { return slices.Contains(fs.revoked, idsOf(k)) })
	for _, h := range sp.Kept {
		if h.Why == rotator.ReasonEdited {
			id := idsOfRef(h.Ref)
			name := in.Desired[desiredIndex(in.Desired, id)].MKT.Name
			p.Kept = append(p.Kept, kept{id, keptEdited, fmt.Sprintf("key %s was edited in place in the key source: BIRD keeps the installed material (give the new material new IDs)", name)})
		}
	}
	for i := range final {
		k := &final[i]
		di := desiredIndex(in.Desired, idsOf(*k))
		if di >= 0 {
			k.Preferred, k.Deprecated = di == fs.pref, !in.Desired[di].Sendable && di != fs.pref
			continue
		}
		k.Preferred, k.Deprecated = false, true
		p.Kept = append(p.Kept, fs.keptWhy(in, idsOf(*k)))
	}
	if in.Preferred < 0 && fs.pref >= 0 {
		p.Kept = append(p.Kept, noSendable(schedIDs(in.Desired[fs.pref])))
	}
	if len(final) == 0 && len(fs.revoked) > 0 {
		return plan{Disabled: true, Kept: p.Kept}
	}
	if !slices.ContainsFunc(final, func(k bird.Key) bool { return !k.Deprecated }) {
		// No key may be sent with now: BIRD refuses such a list. Keep
		// sending with the key written preferred, if it is still here.
		i := slices.IndexFunc(final, func(k bird.Key) bool {
			return slices.ContainsFunc(in.Written, func(w bird.Key) bool { return w.Preferred && idsOf(w) == idsOf(k) })
		})
		if i < 0 {
			return plan{Err: fmt.Errorf("no key may be sent with now (none has a send lifetime covering it) and none was: BIRD refuses a key list without one; the peer's file is left as it is")}
		}
		final[i].Preferred, final[i].Deprecated = true, false
		p.Kept = append(p.Kept, noSendable(idsOf(final[i])))
	}
	slices.SortFunc(final, func(a, b bird.Key) int { return cmpIDs(idsOf(a), idsOf(b)) })
	p.Keys = final
	return p
}

func noSendable(id ids) kept {
	return kept{id, keptNoSendable, "no key has a send lifetime covering now: BIRD keeps sending with it (add a key with a current send lifetime)"}
}

// keptWhy says why a written key no longer desired stays in the file.
func (fs fileSocketIn) keptWhy(in input, id ids) kept {
	switch {
	case in.Unread != nil:
		return kept{id, keptUnread, fmt.Sprintf("no longer desired, but BIRD's session with this neighbor could not be read (%v): kept until it can be seen to have switched", in.Unread)}
	case in.Session == nil:
		return kept{id, keptNoSession, "no longer desired, but no session is up: kept for the next reconnect"}
	}
	return kept{id, keptInUse, "no longer desired, but the peer still sends with it (or was not yet seen sending with a desired key): kept until it has switched"}
}
