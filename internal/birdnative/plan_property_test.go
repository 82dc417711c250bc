package birdnative

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// fileOf is the file a plan writes ("error": none, the file stays).
func fileOf(p plan) string {
	if p.Err != nil {
		return "error"
	}
	return string(render(p.Keys, p.Disabled))
}

// randomInput is a peer's planning input over key IDs 1..5 (send n, recv
// n+100, as the key source's chains pair them): desired keys, some
// accept-only, one preferred (-1 only when none is sendable, as the policy
// answers); a written file whose keys have the desired material or other
// material (an edit in place); revoked keys not desired; and no session,
// an unread one, or one whose keys (those of the file) have pkt_good now
// and at the previous read (before nil: the first read), with a
// Current_key and the previous read's RNext_key and its run of reads.
func randomInput(r *rand.Rand) input {
	var in input
	sendable := false
	for n := uint8(1); n <= 4; n++ {
		if r.IntN(2) == 0 {
			continue
		}
		k := sk(n, r.IntN(3) > 0)
		sendable = sendable || k.Sendable
		in.Desired = append(in.Desired, k)
	}
	in.Preferred = -1
	if sendable {
		in.Preferred = r.IntN(len(in.Desired))
	}
	pref := r.IntN(7) // the written key preferred, if written
	for n := uint8(1); n <= 5; n++ {
		if r.IntN(3) == 0 {
			continue
		}
		w := wk(n, int(n) == pref)
		if r.IntN(6) == 0 {
			w.Secret = tcpao.NewSecret([]byte(fmt.Sprintf("other material %d", n)))
		}
		in.Written = append(in.Written, w)
		if desiredIndex(in.Desired, idsOf(w)) < 0 && r.IntN(4) == 0 {
			in.Revoked = append(in.Revoked, idsOf(w))
		}
	}
	switch r.IntN(6) {
	case 0:
	case 1:
		in.Unread = errors.New("not read")
	default:
		s := &session{good: map[ids]uint64{}}
		if r.IntN(4) > 0 {
			s.before = map[ids]uint64{}
			s.base.runs = 1 + r.IntN(3)
			if i := r.IntN(len(in.Written) + 1); i < len(in.Written) {
				s.base.rnext, s.base.hasRNext = idsOf(in.Written[i]), true
			}
		}
		if i := r.IntN(2 * (len(in.Written) + 1)); i < len(in.Written) {
			s.current, s.hasCurrent = idsOf(in.Written[i]), true
		}
		for _, w := range in.Written {
			if g := uint64(r.IntN(3)) * 5; g > 0 {
				s.good[idsOf(w)] = g
				if s.before != nil {
					s.before[idsOf(w)] = g - uint64(r.IntN(2))*5
				}
			}
		}
		in.Session = s
	}
	return in
}

// knownDifference says why planFile's file may differ from planPeer's for
// in ("": it may not), given both files' keys. Each is the rotator's rule
// where planPeer had its own, and neither strands (docs/wip/birdexec.md):
//   - all-or-nothing: RetireProof lets the old keys go only once none of
//     them (nor a revoked key the peer sends with) verified a segment
//     since the last read; planPeer retired each key whose own count
//     stopped. planFile keeps a key planPeer retired, never the reverse.
//   - no-sendable: no key may be sent with and the key written preferred
//     is no longer desired: BIRD sends with it, so planFile keeps it (the
//     file's RNext_key); planPeer retired it and then refused the file.
//   - unproven: the peer was not seen sending with the preferred key
//     since a settled read (session.settled): planFile keeps the keys it
//     sent with; planPeer took any desired key's segment, ever, for the
//     proof (TestRetireNeedsTheNewKeySeen: a defect, roll.pml's executor
//     end finds the peer sending with the dropped key).
//   - session-current: BIRD's session sends with the key (its
//     Current_key, which the peer's RNext chose): planFile keeps it, as
//     the rotator keeps a Current_key; planPeer dropped it (the key the
//     peer last authenticated BIRD's segments with).
func knownDifference(in input, old, nw plan) string {
	wpref := slices.IndexFunc(in.Written, func(w bird.Key) bool { return w.Preferred })
	if in.Preferred < 0 && wpref >= 0 && desiredIndex(in.Desired, idsOf(in.Written[wpref])) < 0 {
		if nw.Err == nil && !slices.ContainsFunc(nw.Keys, func(k bird.Key) bool { return k.Preferred && idsOf(k) == idsOf(in.Written[wpref]) }) {
			return "" // planFile dropped the key BIRD sends with
		}
		return "no-sendable"
	}
	if old.Err != nil || nw.Err != nil || in.Session == nil {
		return ""
	}
	for _, k := range old.Keys {
		if !slices.ContainsFunc(nw.Keys, func(n bird.Key) bool { return idsOf(n) == idsOf(k) }) {
			return "" // planFile dropped a key planPeer kept
		}
	}
	s := in.Session
	if s.hasCurrent && !slices.ContainsFunc(old.Keys, func(k bird.Key) bool { return idsOf(k) == s.current }) &&
		slices.ContainsFunc(nw.Keys, func(k bird.Key) bool { return idsOf(k) == s.current }) {
		return "session-current"
	}
	if pref := fileAsSocket(in).pref; pref < 0 || !s.settled(schedIDs(in.Desired[pref])) || !s.rising(schedIDs(in.Desired[pref])) {
		return "unproven"
	}
	if slices.ContainsFunc(in.Written, func(w bird.Key) bool {
		return desiredIndex(in.Desired, idsOf(w)) < 0 && s.rising(idsOf(w))
	}) {
		return "all-or-nothing"
	}
	return ""
}

// TestPlanFileIsPlanPeer: the file planned by the rotator's planner
// (planFile) is planPeer's, on TestPlanPeer's cases and random inputs,
// but for the known differences (knownDifference).
func TestPlanFileIsPlanPeer(t *testing.T) {
	for _, tc := range planPeerCases() {
		if o, n := fileOf(planPeer(tc.in)), fileOf(planFile(tc.in)); o != n {
			t.Errorf("%s: planFile wrote\n%s\nplanPeer\n%s", tc.name, n, o)
		}
	}
	r := rand.New(rand.NewPCG(50, 1))
	known := map[string]int{}
	for i := range 20000 {
		in := randomInput(r)
		old, nw := planPeer(in), planFile(in)
		if fileOf(old) == fileOf(nw) && old.Disabled == nw.Disabled {
			continue
		}
		why := knownDifference(in, old, nw)
		if why == "" {
			t.Fatalf("input %d: %s\nplanFile wrote\n%s\nplanPeer\n%s", i, describe(in), fileOf(nw), fileOf(old))
		}
		known[why]++
	}
	t.Logf("known differences: %v", known)
}

// describe renders in for a failure.
func describe(in input) string {
	var b bytes.Buffer
	for i, d := range in.Desired {
		fmt.Fprintf(&b, "desired %d sendable=%v preferred=%v; ", d.MKT.SendID, d.Sendable, i == in.Preferred)
	}
	for _, w := range in.Written {
		fmt.Fprintf(&b, "written %d preferred=%v fp=%x; ", w.SendID, w.Preferred, w.Secret.Fingerprint())
	}
	fmt.Fprintf(&b, "revoked %v unread %v", in.Revoked, in.Unread)
	if in.Session != nil {
		fmt.Fprintf(&b, " session good %v before %v", in.Session.good, in.Session.before)
	}
	return b.String()
}

// proved: the peer sent with the preferred key since a settled read.
func proved(in input) bool {
	pref := fileAsSocket(in).pref
	return pref >= 0 && in.Session.settled(schedIDs(in.Desired[pref])) && in.Session.rising(schedIDs(in.Desired[pref]))
}

// TestPlanFileNeverStrands: the never-strand rule on random inputs. No
// revoked key is written and every desired one is; while the session is
// not read, or before the peer was seen sending with a desired key, no
// written key leaves but a revoked one; a key whose pkt_good rose since
// the previous read (with none, one the peer sent with) stays, and so do
// BIRD's session's Current_key and, until the peer was seen sending with
// the preferred key since a settled read, every key it sent with; and with
// no key to send with, the key written preferred stays and is preferred.
func TestPlanFileNeverStrands(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 2))
	for i := range 20000 {
		in := randomInput(r)
		p := planFile(in)
		if p.Err != nil {
			continue
		}
		has := func(id ids) bool { return slices.ContainsFunc(p.Keys, func(k bird.Key) bool { return idsOf(k) == id }) }
		fail := func(format string, a ...any) {
			t.Fatalf("input %d: %s: %s\nfile:\n%s", i, describe(in), fmt.Sprintf(format, a...), fileOf(p))
		}
		for _, id := range in.Revoked {
			if has(id) {
				fail("revoked key %v written", id)
			}
		}
		if p.Disabled {
			continue
		}
		for _, d := range in.Desired {
			if !has(schedIDs(d)) {
				fail("desired key %v not written", schedIDs(d))
			}
		}
		seen := in.Unread == nil && in.Session != nil && slices.ContainsFunc(in.Desired, func(d policy.ScheduledKey) bool { return in.Session.good[schedIDs(d)] > 0 })
		for _, w := range in.Written {
			id := idsOf(w)
			switch {
			case slices.Contains(in.Revoked, id) || has(id):
			case !seen:
				fail("key %v left while the peer's key is unknown", id)
			case in.Session.rising(id):
				fail("key %v left while its pkt_good rose", id)
			case in.Session.hasCurrent && in.Session.current == id:
				fail("key %v, BIRD's session's Current_key, left", id)
			case in.Session.good[id] > 0 && !proved(in):
				fail("key %v, which the peer sent with, left before the peer was seen sending with the preferred key since a settled read", id)
			case in.Preferred < 0 && w.Preferred:
				fail("key %v, the only one BIRD may send with, left", id)
			}
		}
		if n := len(slices.DeleteFunc(slices.Clone(p.Keys), func(k bird.Key) bool { return !k.Preferred || k.Deprecated })); n != 1 {
			fail("%d keys preferred", n)
		}
	}
}
