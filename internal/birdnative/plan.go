package birdnative

import (
	"fmt"
	"slices"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/policy"
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

// settled reports whether the base read found pref RNext_key and so did
// the read before it: our segments that asked the peer for another key
// landed before the first of the two (the network's delay is shorter
// than a poll), and the peer's segments signed before it followed the
// last of them landed before the second, so every segment verified since
// the base was signed with the peer's Current_key for good (the
// machine's graceSent, after its wait; roll.pml's XSENT).
func (s *session) settled(pref ids) bool {
	return s.before != nil && s.base.hasRNext && s.base.rnext == pref && s.base.runs >= 2
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

// planPeer is the never-strand rule for a speaker aokeyd drives through
// its configuration, as rotator.PlanSocket is for the sockets it writes:
// the desired keys, the newest sendable one preferred and the accept-only
// ones deprecated; a key the file holds that is no longer desired stays
// (deprecated) until the peer was seen sending with a desired key and
// stopped sending with it, and while no session is up (the next
// reconnect may need it), unless revoked; new material under the IDs of a
// written key is held back (BIRD would swap it under the session).
func planPeer(in input) plan {
	var p plan
	written := func(id ids) (bird.Key, bool) {
		i := slices.IndexFunc(in.Written, func(w bird.Key) bool { return idsOf(w) == id })
		if i < 0 {
			return bird.Key{}, false
		}
		return in.Written[i], true
	}
	revoked := func(id ids) bool { return slices.Contains(in.Revoked, id) }
	seenDesired := false
	for i, d := range in.Desired {
		k := bird.Key{SendID: d.MKT.SendID, RecvID: d.MKT.RecvID, Algorithm: d.MKT.Algorithm, Secret: d.MKT.Secret,
			Preferred: i == in.Preferred, Deprecated: !d.Sendable && i != in.Preferred}
		if w, ok := written(idsOf(k)); ok && (w.Algorithm != k.Algorithm || w.Secret.Fingerprint() != k.Secret.Fingerprint()) {
			// An edit in place: the written material stays.
			w.Preferred, w.Deprecated = k.Preferred, k.Deprecated
			k = w
			p.Kept = append(p.Kept, kept{idsOf(k), keptEdited, fmt.Sprintf("key %s was edited in place in the key source: BIRD keeps the installed material (give the new material new IDs)", d.MKT.Name)})
		}
		if in.Session != nil && in.Session.good[idsOf(k)] > 0 {
			seenDesired = true
		}
		p.Keys = append(p.Keys, k)
	}
	for _, w := range in.Written {
		id := idsOf(w)
		if slices.ContainsFunc(p.Keys, func(k bird.Key) bool { return idsOf(k) == id }) || revoked(id) {
			continue
		}
		switch {
		case in.Unread != nil:
			p.Kept = append(p.Kept, kept{id, keptUnread, fmt.Sprintf("no longer desired, but BIRD's session with this neighbor could not be read (%v): kept until it can be seen to have switched", in.Unread)})
		case in.Session == nil:
			p.Kept = append(p.Kept, kept{id, keptNoSession, "no longer desired, but no session is up: kept for the next reconnect"})
		case !seenDesired || in.Session.rising(id):
			p.Kept = append(p.Kept, kept{id, keptInUse, "no longer desired, but the peer still sends with it (or was not yet seen sending with a desired key): kept until it has switched"})
		default:
			continue // retired: the peer sends with a desired key
		}
		w.Preferred, w.Deprecated = false, true
		p.Keys = append(p.Keys, w)
	}
	if len(p.Keys) == 0 && slices.ContainsFunc(in.Written, func(w bird.Key) bool { return revoked(idsOf(w)) }) {
		return plan{Disabled: true, Kept: p.Kept}
	}
	if !slices.ContainsFunc(p.Keys, func(k bird.Key) bool { return !k.Deprecated }) {
		// No key may be sent with now: BIRD refuses such a list. Keep
		// sending with the key written preferred, if it is still here.
		i := slices.IndexFunc(p.Keys, func(k bird.Key) bool {
			w, ok := written(idsOf(k))
			return ok && w.Preferred
		})
		if i < 0 {
			return plan{Err: fmt.Errorf("no key may be sent with now (none has a send lifetime covering it) and none was: BIRD refuses a key list without one; the peer's file is left as it is")}
		}
		p.Keys[i].Preferred, p.Keys[i].Deprecated = true, false
		p.Kept = append(p.Kept, kept{idsOf(p.Keys[i]), keptNoSendable, "no key has a send lifetime covering now: BIRD keeps sending with it (add a key with a current send lifetime)"})
	}
	slices.SortFunc(p.Keys, func(a, b bird.Key) int {
		if a.SendID != b.SendID {
			return int(a.SendID) - int(b.SendID)
		}
		return int(a.RecvID) - int(b.RecvID)
	})
	return p
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
