package rotator

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// The rule for edits in place (edit.go), written apart from the planner,
// for TestPlanProperties.

// randomSYNs connects far ends through listener s with its keys at
// random, verified or failing against another secret (only IPv6 peers
// reach the test's IPv6 listener), takes some keys' bases as DownWatch
// would, and connects again: the bases it returns are what rule
// EditPeerDown counts from.
func randomSYNs(r *rand.Rand, s *testSock, installed []tcpao.Key) []DownKey {
	syns := func() {
		for _, k := range installed {
			switch r.IntN(4) {
			case 0:
				synTo(s, k, false)
			case 1:
				synTo(s, k, true)
			}
		}
	}
	syns()
	ks, _ := s.Keys(tcpao.KeyFilter{}) // ENOENT: a listener without keys
	var down []DownKey
	for _, k := range ks {
		if r.IntN(2) == 0 {
			x := DownKey{Ref: k.KeyRef, FP: k.Fingerprint, PktGood: k.PktGood, PktBad: k.PktBad}
			if r.IntN(8) == 0 {
				x.FP = tcpao.Fingerprint{0xee} // a base of other material
			}
			down = append(down, x)
		}
	}
	syns()
	syns() // a key may see good and bad segments since its base
	return down
}

// frozenCovers reports whether a range of frozen covers r.
func frozenCovers(frozen []KeyRange, r tcpao.KeyRef) bool {
	return slices.ContainsFunc(frozen, func(k KeyRange) bool { return k.Covers(r) })
}

// editAllowed reports whether new material may replace installed key k
// of the socket read as before: approved; else not while a frozen range
// covers k; on an established socket when k authenticated nothing (its
// pkt_good 0, neither Current_key nor RNext_key) and the peer was seen to
// choose Current_key; on a listener when k verified no SYN and no
// session carries it, or when its base (Down) shows bad segments and no
// good one since.
func editAllowed(d Desired, before Observed, k tcpao.KeyInfo) bool {
	listen := d.Kind == Listening
	approved := slices.ContainsFunc(d.Replace, func(x tcpao.KeyRef) bool {
		x = normRef(x)
		return x == k.KeyRef || !listen && sameSessionKey(x, k.KeyRef)
	})
	switch {
	case approved:
		return true
	case frozenCovers(d.Frozen, k.KeyRef):
		return false
	case !listen:
		return k.PktGood == 0 && !k.IsCurrent && !k.IsRNext && before.Settled
	}
	carried := slices.ContainsFunc(before.Carried, func(c tcpao.KeyRef) bool { return sameSessionKey(normRef(c), k.KeyRef) })
	if k.PktGood == 0 && !carried {
		return true
	}
	for _, x := range before.Down {
		if normRef(x.Ref) == k.KeyRef && x.FP == k.Fingerprint {
			return k.PktBad > x.PktBad && k.PktGood == x.PktGood
		}
	}
	return false
}

// checkEdits: every edit in place (a desired key with the IDs of an
// installed key of other material) that the rule allows is applied (its
// add is in the plan, or the plan says why it is blocked), with an
// applied rule in Edits; every other one is held back (kept,
// edited-in-place) with a held rule in Edits. checkNeverStrand checks
// that no add applies an edit the rule holds back.
func checkEdits(d Desired, before Observed, sp SocketPlan) error {
	listen := d.Kind == Listening
	for _, dk := range d.Keys {
		r := normRef(dk.KeyRef)
		allowed, edit := true, false
		for _, k := range before.Keys {
			same := k.SendID == r.SendID && k.RecvID == r.RecvID && (listen && conflicts(k.KeyRef, r) || !listen && sameSessionKey(k.KeyRef, r))
			if !same || sameMaterial(&dk.Key, &k) {
				continue
			}
			edit = true
			allowed = allowed && editAllowed(d, before, k)
		}
		if !edit {
			continue
		}
		refers := func(h Held) bool { return normRef(h.Ref) == r }
		added := slices.ContainsFunc(sp.Ops, func(op Op) bool { return op.Kind == OpAdd && normRef(op.Key.KeyRef) == r })
		blocked := slices.ContainsFunc(sp.Blocked, refers)
		i := slices.IndexFunc(sp.Edits, func(e Edit) bool { return normRef(e.Ref) == r })
		switch {
		case allowed && !added && !blocked:
			return fmt.Errorf("the edit of %s is allowed, but neither applied nor blocked", r)
		case allowed && added && (i < 0 || !sp.Edits[i].Rule.Applied()):
			return fmt.Errorf("the edit of %s is applied without an applied rule in Edits (%v)", r, sp.Edits)
		case !allowed && !slices.ContainsFunc(sp.Kept, func(h Held) bool { return refers(h) && h.Why == ReasonEdited }):
			return fmt.Errorf("the edit of %s is held back without a word", r)
		case !allowed && (i < 0 || sp.Edits[i].Rule.Applied()):
			return fmt.Errorf("the edit of %s is held back without a held rule in Edits (%v)", r, sp.Edits)
		}
	}
	return nil
}
