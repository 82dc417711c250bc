package rotator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// randomCase builds a random socket (through the fake kernel, so it is a
// state the kernel can be in) and a random valid desired state for it.
func randomCase(r *rand.Rand) (*fakeSock, Desired) {
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
	var s *fakeSock
	if listen {
		s = newFakeListener()
	} else if r.IntN(10) == 0 {
		s = newFakeEstablished()
	} else {
		s = newFakeEstablished(randKey())
	}
	for n := r.IntN(6); n > 0; n-- {
		_ = s.AddKey(randKey(), tcpao.AddOptions{})
	}
	if !listen && s.ao {
		ks, _ := s.Keys(tcpao.KeyFilter{})
		c, n := ks[r.IntN(len(ks))].SendID, ks[r.IntN(len(ks))].RecvID
		_ = s.SetInfo(tcpao.InfoChange{Current: &c, RNext: &n})
	}
	if !listen {
		for _, k := range s.keys {
			if r.IntN(2) == 0 {
				k.good = 1 // the peer was seen sending with it
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
		if !desired && r.IntN(3) == 0 {
			d.Revoked = append(d.Revoked, o.KeyRef)
		}
	}
	return s, d
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
		s, d := randomCase(r)
		before := observe(t, s)
		sp := PlanSocket(d, before)
		if err := checkPlan(s, d, before, sp); err != nil {
			var b strings.Builder
			_ = Render(&b, Plan{sp})
			t.Fatalf("seed %d: %v\ndesired: %+v\nplan:\n%s", seed, err, d, b.String())
		}
	}
}

func checkPlan(s *fakeSock, d Desired, before Observed, sp SocketPlan) error {
	listen := d.Kind == Listening
	lastAdd := -1
	for i, op := range sp.Ops {
		if op.Kind == OpAdd {
			lastAdd = i
		}
	}
	revoked := func(r tcpao.KeyRef) bool {
		return slices.ContainsFunc(d.Revoked, func(x tcpao.KeyRef) bool { return normRef(x) == r })
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
					if k := s.bySend(op.Del.Current); k == nil || k.good == 0 {
						return fmt.Errorf("op %d: replacing Current_key makes send=%d current, which the peer was never seen to use", i+1, op.Del.Current)
					}
				}
			}
		}
		if err := applyOp(s, &sp.Ops[i]); err != nil {
			return fmt.Errorf("op %d (%s): kernel refused: %w", i+1, op.Line(), err)
		}
		if !listen && s.ao {
			in, _ := s.Info()
			ks, _ := s.Keys(tcpao.KeyFilter{})
			if len(ks) > 0 && (!in.HaveCurrent || !in.HaveRNext) {
				return fmt.Errorf("op %d: established socket left without current/rnext", i+1)
			}
			for _, k := range ks {
				if k.IsCurrent && revoked(k.KeyRef) && op.Kind == OpDel && op.Del.SetCurrent {
					return fmt.Errorf("op %d: forced delete made revoked key %s current", i+1, k.KeyRef)
				}
			}
		}
	}
	after, err := Observe(s)
	if err != nil {
		return err
	}
	if err := checkReached(d, before, after, sp); err != nil {
		return err
	}
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
		for _, h := range append(slices.Clone(sp.Deferred), sp.Blocked...) {
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
	blocked := len(sp.Blocked) > 0
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
		anySendable := slices.ContainsFunc(d.Keys, func(x DesiredKey) bool { _, ok := have[normRef(x.KeyRef)]; return ok && !x.AcceptOnly })
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
