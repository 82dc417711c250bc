package rotator

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// refBatches is ListenerBatches as first written (a record per peer, a
// stable sort by first delete): the counting sort must give the same
// batches.
func refBatches(sp SocketPlan, per int) [][]Op {
	if per <= 0 {
		per = 1
	}
	type peerOps struct {
		ops   []Op
		first int
	}
	var order []*peerOps
	byPeer := map[netip.Prefix]*peerOps{}
	var global []Op
	for i, op := range sp.Ops {
		if op.Kind == OpSetInfo {
			global = append(global, op)
			continue
		}
		p := normRef(op.Ref()).Peer
		po := byPeer[p]
		if po == nil {
			po = &peerOps{first: len(sp.Ops) + i}
			byPeer[p] = po
			order = append(order, po)
		}
		if op.Kind == OpDel && po.first >= len(sp.Ops) {
			po.first = i
		}
		po.ops = append(po.ops, op)
	}
	slices.SortStableFunc(order, func(a, b *peerOps) int { return cmp.Compare(a.first, b.first) })
	var out [][]Op
	cur := global
	n := 0
	for _, po := range order {
		if n == per {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, po.ops...)
		n++
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Random listener plans (peers that rotate, gain, lose or replace keys, some
// as subnets, with and without ao_required changes): the batches equal the
// reference's, and the planned optmem walk equals the general one.
func TestListenerBatchesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		peers := rng.IntN(40)
		lis := newListener()
		d := Desired{Socket: "lis", Kind: Listening, AORequired: rng.IntN(4) == 0}
		for i := range peers {
			pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), 32)
			if rng.IntN(8) == 0 {
				pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)
			}
			old := rng.IntN(3)
			for j := range old {
				k := mkKey(pfx.String(), uint8(1+j), uint8(1+j), fmt.Sprintf("o%d", i))
				if err := lis.AddKey(k, tcpao.AddOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			switch rng.IntN(4) {
			case 0: // rotate
				d.Keys = append(d.Keys, dk(mkKey(pfx.String(), 7, 7, fmt.Sprintf("n%d", i))))
			case 1: // keep one, add one
				if old > 0 {
					d.Keys = append(d.Keys, dk(mkKey(pfx.String(), 1, 1, fmt.Sprintf("o%d", i))))
				}
				d.Keys = append(d.Keys, dk(mkKey(pfx.String(), 8, 8, fmt.Sprintf("n%d", i))))
			case 2: // replace in place
				d.Keys = append(d.Keys, dk(mkKey(pfx.String(), 1, 1, fmt.Sprintf("r%d", i))))
			} // 3: lose every key
		}
		rng.Shuffle(len(d.Keys), func(i, j int) { d.Keys[i], d.Keys[j] = d.Keys[j], d.Keys[i] })
		obs := observe(t, lis)
		sp := PlanSocket(d, obs)
		if len(sp.Blocked) > 0 {
			continue
		}
		plan := fmt.Sprint(batchLines([][]Op{sp.Ops}))
		for _, per := range []int{1, 2, 3, 64} {
			got, want := ListenerBatches(sp, per), refBatches(sp, per)
			if now := fmt.Sprint(batchLines([][]Op{sp.Ops})); now != plan { // SyncListener's reorders its own plan in place
				t.Fatalf("round %d per=%d: ListenerBatches reordered the caller's plan:\nnow %s\nwas %s", round, per, now, plan)
			}
			if fmt.Sprint(batchLines(got)) != fmt.Sprint(batchLines(want)) {
				t.Fatalf("round %d per=%d:\ngot  %v\nwant %v", round, per, batchLines(got), batchLines(want))
			}
			p1, err1 := checkOptMem("lis", obs, got, 0, true)
			p2, err2 := CheckOptMem("lis", obs, got, 0)
			if p1 != p2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("round %d per=%d: planned optmem peak %d (%v), general %d (%v)", round, per, p1, err1, p2, err2)
			}
		}
	}
}

func batchLines(bs [][]Op) [][]string {
	var out [][]string
	for _, b := range bs {
		var l []string
		for _, op := range b {
			l = append(l, op.Line())
		}
		out = append(out, l)
	}
	return out
}
