package birdnative

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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
// Current_key and the previous read's RNext_key, settled or not.
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
			if i := r.IntN(len(in.Written) + 1); i < len(in.Written) {
				s.base = settledOn(idsOf(in.Written[i]), s.before)
				s.base.since = s.base.since.Add(time.Duration(r.IntN(3)-1) * time.Second)
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

// TestPlanPeerNeverStrands: the never-strand rule on random inputs. No
// revoked key is written and every desired one is; while the session is
// not read, or before the peer was seen sending with a desired key, no
// written key leaves but a revoked one; a key whose pkt_good rose since
// the previous read (with none, one the peer sent with) stays, and so do
// BIRD's session's Current_key and, until the peer was seen sending with
// the preferred key since a settled read, every key it sent with; and with
// no key to send with, the key written preferred stays and is preferred.
func TestPlanPeerNeverStrands(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 2))
	for i := range 20000 {
		in := randomInput(r)
		p := planPeer(in)
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
