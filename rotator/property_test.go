package rotator

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// observedExtra are the inputs of Observed that the kernel does not give:
// what the sessions carry (Carried) and, for the rule for edits in
// place, the listener keys' bases (Down) and the session's Settled.
type observedExtra struct {
	carried []tcpao.KeyRef
	down    []DownKey
	settled bool
}

func (x observedExtra) onto(o Observed) Observed {
	o.Carried, o.Down, o.Settled = x.carried, x.down, x.settled
	return o
}

// randomCase builds a random socket (through the fake kernel, so it is a
// state the kernel can be in) and a random valid desired state for it.
func randomCase(r *rand.Rand) (_ *testSock, _ Desired, x observedExtra) {
	listen := r.IntN(2) == 0
	peers := []string{"192.0.2.1/32"}
	if listen {
		peers = append(peers, "192.0.2.2/32", "2001:db8::1/128")
		if r.IntN(4) == 0 {
			peers = append(peers, "192.0.2.0/24")
		}
	}
	randKey := func() tcpao.Key {
		k := mkKey(peers[r.IntN(len(peers))], uint8(r.IntN(4)), uint8(r.IntN(4)), fmt.Sprintf("s%d", r.IntN(3)))
		if r.IntN(5) == 0 {
			k.Algorithm = tcpao.HMACSHA1
		}
		return k
	}
	var s *testSock
	if listen {
		s = newListener()
	} else if r.IntN(10) == 0 {
		s = newEstablished()
	} else {
		s = newEstablished(randKey())
	}
	var installed []tcpao.Key
	for n := r.IntN(6); n > 0; n-- {
		if k := randKey(); s.AddKey(k, tcpao.AddOptions{}) == nil {
			installed = append(installed, k)
		}
	}
	if listen {
		// Connects through the listener (those of IPv6 peers reach it):
		// verified, or failing against another secret; then the bases
		// of some keys (DownWatch's first sight of them down), then
		// more connects.
		x.down = randomSYNs(r, s, installed)
	} else {
		x.settled = r.IntN(2) == 0
	}
	if !listen && s.hasAO() {
		ks, _ := s.Keys(tcpao.KeyFilter{})
		c, n := ks[r.IntN(len(ks))].SendID, ks[r.IntN(len(ks))].RecvID
		_ = s.SetInfo(tcpao.InfoChange{Current: &c, RNext: &n})
	}
	if !listen {
		ks, _ := s.Keys(tcpao.KeyFilter{})
		for _, k := range ks {
			if r.IntN(2) == 0 {
				s.peerSendsKey(k.SendID, k.RecvID, 1) // the peer was seen sending with it
			}
		}
	}
	if r.IntN(3) == 0 {
		req := true
		_ = s.SetInfo(tcpao.InfoChange{AORequired: &req})
	}
	obs, _ := s.Keys(tcpao.KeyFilter{})

	d := Desired{Socket: "rand", Kind: Established, AORequired: r.IntN(2) == 0}
	if listen {
		d.Kind = Listening
	}
	for n := r.IntN(5); n > 0; n-- {
		var k tcpao.Key
		if len(obs) > 0 && r.IntN(2) == 0 {
			o := obs[r.IntN(len(obs))]
			k = mkKey(o.Peer.String(), o.SendID, o.RecvID, fmt.Sprintf("s%d", r.IntN(3)))
			k.Algorithm = o.Algorithm
		} else {
			k = randKey()
		}
		ok := true
		for _, e := range d.Keys {
			if conflicts(normRef(e.KeyRef), normRef(k.KeyRef)) || conflicts(normRef(k.KeyRef), normRef(e.KeyRef)) {
				ok = false
			}
		}
		if ok {
			d.Keys = append(d.Keys, DesiredKey{Key: k, AcceptOnly: r.IntN(5) == 0})
		}
	}
	if !listen && len(d.Keys) > 0 {
		if k := d.Keys[r.IntN(len(d.Keys))]; !k.AcceptOnly && r.IntN(4) != 0 {
			d.WantCurrent = ID(k.SendID)
		}
		if r.IntN(4) != 0 {
			d.WantRNext = ID(d.Keys[r.IntN(len(d.Keys))].RecvID)
		}
	}
	for _, o := range obs {
		desired := slices.ContainsFunc(d.Keys, func(k DesiredKey) bool { return normRef(k.KeyRef) == o.KeyRef })
		switch {
		case desired:
		case r.IntN(3) == 0:
			d.Revoked = append(d.Revoked, RevokedKey{KeyRef: o.KeyRef, Fingerprint: o.Fingerprint})
		case r.IntN(4) == 0:
			// The key's reference with other material: not the key.
			d.Revoked = append(d.Revoked, RevokedKey{KeyRef: o.KeyRef, Fingerprint: tcpao.Fingerprint{0xff}})
		}
		// The never-strand rule's inputs: keys a listener's sessions
		// carry, keys a roll proved the peer moved off (Retire) and
		// edits an operator approved (Replace), at random, for keys that
		// are desired, edited in place, past their lifetime (no longer
		// desired) or revoked alike.
		switch {
		case listen && r.IntN(3) == 0:
			c := o.KeyRef
			if r.IntN(2) == 0 && c.Peer.Bits() < c.Peer.Addr().BitLen() {
				c.Peer = netip.PrefixFrom(c.Peer.Addr().Next(), c.Peer.Addr().BitLen()) // a session under a prefix binding
			}
			x.carried = append(x.carried, c)
		case !listen && r.IntN(4) == 0:
			d.Retire = append(d.Retire, o.KeyRef)
		}
		if r.IntN(6) == 0 {
			d.Replace = append(d.Replace, o.KeyRef)
		}
	}
	if r.IntN(8) == 0 && len(obs) > 0 {
		// A frozen binding, or the start-up gate.
		d.Frozen = []KeyRange{{Prefix: obs[r.IntN(len(obs))].Peer, AnyDevice: true}}
	}
	return s, d, x
}

// TestPlanProperties checks the planner's invariants over random states:
// adds before deletes, del_async exactly on listeners, in-use keys of an
// established socket only removed by a forced delete naming the
// replacement (revoked or replaced keys only; a replacement makes only a
// key the peer was seen to use current), never a moment without a
// usable key, the plan applies cleanly and reaches the desired state, and
// re-planning on the result is empty.
func TestPlanProperties(t *testing.T) {
	const n = 5000
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		s, d, x := randomCase(r)
		before := x.onto(observe(t, s))
		sp := PlanSocket(d, before)
		if err := checkPlan(s, d, before, sp); err != nil {
			var b strings.Builder
			_ = Render(&b, Plan{sp})
			t.Fatalf("seed %d: %v\ndesired: %+v\nplan:\n%s", seed, err, d, b.String())
		}
	}
}

func checkPlan(s *testSock, d Desired, before Observed, sp SocketPlan) error {
	listen := d.Kind == Listening
	if err := checkNeverStrand(d, before, sp); err != nil {
		return err
	}
	lastAdd := -1
	for i, op := range sp.Ops {
		if op.Kind == OpAdd {
			lastAdd = i
		}
	}
	revoked := func(k tcpao.KeyInfo) bool {
		return slices.ContainsFunc(d.Revoked, func(x RevokedKey) bool { return normRef(x.KeyRef) == k.KeyRef && x.Fingerprint == k.Fingerprint })
	}
	for i, op := range sp.Ops {
		if op.Kind == OpDel {
			if op.Del.Async != listen {
				return fmt.Errorf("op %d: async=%t on a %s socket", i+1, op.Del.Async, d.Kind)
			}
			if op.Why == ReasonReplace {
				// A replacement delete is followed (after possibly more
				// replacement deletes) by the add it makes room for.
				j := i + 1
				for j < len(sp.Ops) && sp.Ops[j].Kind == OpDel && sp.Ops[j].Why == ReasonReplace {
					j++
				}
				if j == len(sp.Ops) || sp.Ops[j].Kind != OpAdd || !conflicts(op.Del.KeyRef, normRef(sp.Ops[j].Key.KeyRef)) {
					return fmt.Errorf("op %d: replacement delete not followed by its add", i+1)
				}
			} else if i < lastAdd {
				return fmt.Errorf("op %d: delete before add %d", i+1, lastAdd+1)
			}
			if !listen {
				in, _ := s.Info()
				isCur := in.HaveCurrent && in.CurrentKey == op.Del.SendID
				isRN := in.HaveRNext && in.RNextKey == op.Del.RecvID
				if (isCur || isRN) && op.Why != ReasonRevoked && op.Why != ReasonReplace {
					return fmt.Errorf("op %d: deletes an in-use key that is neither revoked nor replaced", i+1)
				}
				if isCur && !op.Del.SetCurrent || isRN && !op.Del.SetRNext {
					return fmt.Errorf("op %d: deletes an in-use key without naming its replacement", i+1)
				}
				if isCur && op.Why == ReasonReplace {
					if !sentWith(s, op.Del.Current) {
						return fmt.Errorf("op %d: replacing Current_key makes send=%d current, which the peer was never seen to use", i+1, op.Del.Current)
					}
				}
			}
		}
		if err := applyOp(s, &tcpao.Deleter{S: s}, &sp.Ops[i]); err != nil {
			return fmt.Errorf("op %d (%s): kernel refused: %w", i+1, op.Line(), err)
		}
		if !listen && s.hasAO() {
			in, _ := s.Info()
			ks, _ := s.Keys(tcpao.KeyFilter{})
			if len(ks) > 0 && (!in.HaveCurrent || !in.HaveRNext) {
				return fmt.Errorf("op %d: established socket left without current/rnext", i+1)
			}
			for _, k := range ks {
				if k.IsCurrent && revoked(k) && op.Kind == OpDel && op.Del.SetCurrent {
					return fmt.Errorf("op %d: forced delete made revoked key %s current", i+1, k.KeyRef)
				}
			}
		}
	}
	after, err := Observe(s, ReadFull)
	if err != nil {
		return err
	}
	if err := checkReached(d, before, after, sp); err != nil {
		return err
	}
	after.Carried, after.Down = before.Carried, before.Down
	// The machine's own write of Current_key or RNext_key makes it see
	// the peer choose again (settle.go).
	after.Settled = before.Settled && !setsCurrentOrRNext(sp.Ops)
	again := PlanSocket(d, after)
	if !again.Empty() {
		return fmt.Errorf("not idempotent: replan has %d ops: %v", len(again.Ops), opLines(again))
	}
	return nil
}

// checkReached verifies the desired state: every desired key present with
// its material (unless the plan reported it blocked), nothing else except
// deferred or blocked keys, RNext as wanted, Current_key a desired sendable
// key unless a stale in-use key holds it.
func checkReached(d Desired, before, after Observed, sp SocketPlan) error {
	held := func(r tcpao.KeyRef) bool {
		if frozenCovers(d.Frozen, r) {
			return true // a frozen binding's keys stay, unreported
		}
		for _, h := range slices.Concat(sp.Deferred, sp.Blocked, sp.Kept) {
			if normRef(h.Ref) == r || !h.Ref.Peer.IsValid() || conflicts(r, normRef(h.Ref)) {
				return true
			}
		}
		return false
	}
	have := map[tcpao.KeyRef]tcpao.KeyInfo{}
	for _, k := range after.Keys {
		have[k.KeyRef] = k
	}
	blocked := len(sp.Blocked) > 0 || len(sp.Kept) > 0
	for _, k := range d.Keys {
		ki, ok := have[normRef(k.KeyRef)]
		if !ok || !sameMaterial(&k.Key, &ki) {
			if !blocked {
				return fmt.Errorf("desired key %s missing or wrong material", k.KeyRef)
			}
		}
	}
	var cur *tcpao.KeyInfo
	for i, k := range after.Keys {
		di := slices.IndexFunc(d.Keys, func(x DesiredKey) bool { return normRef(x.KeyRef) == k.KeyRef && sameMaterial(&x.Key, &k) })
		if di < 0 && !held(k.KeyRef) {
			return fmt.Errorf("undesired key %s left and not reported", k.KeyRef)
		}
		if k.IsCurrent {
			cur = &after.Keys[i]
		}
		if k.IsRNext && d.WantRNext.Valid && k.RecvID != d.WantRNext.ID && !blocked {
			return fmt.Errorf("rnext %d, want %d", k.RecvID, d.WantRNext.ID)
		}
	}
	if d.Kind == Established && cur != nil && !held(cur.KeyRef) {
		di := slices.IndexFunc(d.Keys, func(x DesiredKey) bool { return normRef(x.KeyRef) == cur.KeyRef })
		anySendable := slices.ContainsFunc(d.Keys, func(x DesiredKey) bool {
			k, ok := have[normRef(x.KeyRef)]
			return ok && sameMaterial(&x.Key, &k) && !x.AcceptOnly // an edit held back is not the desired key
		})
		if di < 0 || d.Keys[di].AcceptOnly && anySendable {
			return fmt.Errorf("current %s is not a desired sendable key", cur.KeyRef)
		}
		// Don't fight the peer: a current key that was already a desired
		// sendable key stays.
		for _, k := range before.Keys {
			if k.IsCurrent && k.KeyRef != cur.KeyRef {
				bi := slices.IndexFunc(d.Keys, func(x DesiredKey) bool { return normRef(x.KeyRef) == k.KeyRef && sameMaterial(&x.Key, &k) })
				if bi >= 0 && !d.Keys[bi].AcceptOnly {
					return fmt.Errorf("current moved from desired sendable %s to %s", k.KeyRef, cur.KeyRef)
				}
			}
		}
	}
	if !blocked && d.AORequired != (after.HaveAO && after.Info.AORequired) && !(len(d.Keys) == 0 && !after.HaveAO) {
		return fmt.Errorf("ao_required %t, want %t", after.Info.AORequired, d.AORequired)
	}
	return nil
}

// checkNeverStrand is the never-strand rule, checked against the plan
// itself rather than the planner's code: no delete removes a key in use
// (an established socket's Current_key, RNext_key or a key the peer sent
// with; a listener key that a session carries) unless it is revoked,
// approved for replacement or, on an established socket and neither
// current nor rnext, retired; no add puts new material under the IDs of
// an installed key unless approved; and every key in use that is no
// longer desired is reported (deferred, blocked or kept).
func checkNeverStrand(d Desired, before Observed, sp SocketPlan) error {
	listen := d.Kind == Listening
	// revokedAs: list names k, its reference and its material.
	revokedAs := func(list []RevokedKey, k tcpao.KeyInfo) bool {
		return slices.ContainsFunc(list, func(x RevokedKey) bool {
			n := normRef(x.KeyRef)
			return x.Fingerprint == k.Fingerprint && (n == k.KeyRef || !listen && sameSessionKey(n, k.KeyRef))
		})
	}
	lists := func(list []tcpao.KeyRef, r tcpao.KeyRef) bool {
		return slices.ContainsFunc(list, func(x tcpao.KeyRef) bool {
			x = normRef(x)
			return x == r || !listen && sameSessionKey(x, r)
		})
	}
	inUse := func(k tcpao.KeyInfo) bool {
		if listen {
			return slices.ContainsFunc(before.Carried, func(c tcpao.KeyRef) bool { return sameSessionKey(normRef(c), k.KeyRef) })
		}
		return k.PktGood > 0 // Current_key and RNext_key: checkPlan's forced-delete checks
	}
	for i, op := range sp.Ops {
		for _, k := range before.Keys {
			switch {
			case op.Kind == OpDel && normRef(op.Del.KeyRef) == k.KeyRef && inUse(k):
				ok := revokedAs(d.Revoked, k) || lists(d.Replace, k.KeyRef) || !listen && lists(d.Retire, k.KeyRef) ||
					op.Why == ReasonReplace && editAllowed(d, before, k)
				if !ok {
					return fmt.Errorf("op %d (%s): removes key %s in use without an operator action or a proven retire", i+1, op.Line(), k.KeyRef)
				}
			case op.Kind == OpAdd:
				r := normRef(op.Key.KeyRef)
				if r.SendID == k.SendID && r.RecvID == k.RecvID && conflicts(k.KeyRef, r) &&
					!sameMaterial(&op.Key, &k) && !editAllowed(d, before, k) {
					return fmt.Errorf("op %d (%s): new material under the IDs of installed key %s, which the rule for edits holds back", i+1, op.Line(), k.KeyRef)
				}
			}
		}
	}
	reported := func(r tcpao.KeyRef) bool {
		return slices.ContainsFunc(slices.Concat(sp.Deferred, sp.Blocked, sp.Kept), func(h Held) bool {
			return !h.Ref.Peer.IsValid() || conflicts(r, normRef(h.Ref))
		})
	}
	for _, k := range before.Keys {
		gone := slices.ContainsFunc(sp.Ops, func(op Op) bool { return op.Kind == OpDel && normRef(op.Del.KeyRef) == k.KeyRef })
		desired := slices.ContainsFunc(d.Keys, func(x DesiredKey) bool { return normRef(x.KeyRef) == k.KeyRef && sameMaterial(&x.Key, &k) })
		if (inUse(k) || k.IsCurrent || k.IsRNext) && !gone && !desired && !reported(k.KeyRef) && !frozenCovers(d.Frozen, k.KeyRef) {
			return fmt.Errorf("key %s in use and no longer desired is kept without a word", k.KeyRef)
		}
	}
	return checkEdits(d, before, sp)
}

// sentWith reports whether the peer was seen sending with s's key whose
// SendID is send (its pkt_good).
func sentWith(s *testSock, send uint8) bool {
	ks, _ := s.Keys(tcpao.KeyFilter{})
	for _, k := range ks {
		if k.SendID == send {
			return k.PktGood > 0
		}
	}
	return false
}
