package rotator

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestCarriedAfterDropMidRoll: the session's Current_key moved to the new
// key (the peer sends with it: its pkt_good is above zero) and the session
// goes down before the roll completes (a long grace period). The down
// peer's carried keys (CarriedByPeer) are what its last session carried,
// the new key among them: a listener must keep the key the peer last
// authenticated with (busy run 9, TestEditInPlaceCorrected mid_roll).
func TestCarriedAfterDropMidRoll(t *testing.T) { synctest.Test(t, testCarriedAfterDropMidRoll) }

func testCarriedAfterDropMidRoll(t *testing.T) {
	cfg := Config{SwitchTimeout: time.Hour, Grace: time.Hour, Poll: time.Millisecond, Backoff: time.Hour}
	us := NewController(Options{Config: cfg})
	them := NewController(Options{Config: cfg})
	defer us.Close()
	defer them.Close()
	id := pid("p")
	k1, k2 := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	x, y := connect(t, us, them, id, k1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	drops := 0
	wg.Add(1)
	go pump(ctx, &wg, x, y, &drops, &mu)
	// k1 and k2 both desired, k2 preferred; the far end prefers k2 too.
	roll := Desired{Keys: []DesiredKey{dk(k1), dk(k2)}, WantCurrent: ID(2), WantRNext: ID(2)}
	us.SetDesired(id, roll)
	them.SetDesired(id, farDesired(roll))
	var last Status
	waitUntil(t, 20*time.Second, "the switch to k2 on our session, its segments good, the roll in its grace period", func() bool {
		st := us.Status()
		if len(st) != 1 || st[0].State != StateGrace || st[0].Current != ID(2) {
			return false
		}
		for _, k := range st[0].Counters.Keys {
			if k.SendID == 2 && k.PktGood > 0 {
				last = st[0]
				return true
			}
		}
		return false
	})
	cancel()
	wg.Wait()
	if last.Rolls != 0 {
		t.Fatalf("the roll completed (%d rolls): the session must drop before it does", last.Rolls)
	}
	us.PeerDown(id) // the far end restarts the session before the roll completes
	them.PeerDown(id)
	carried := us.CarriedByPeer()[id]
	if !slices.ContainsFunc(carried, func(c CarriedKey) bool { return sameSessionKey(normRef(c.Ref), normRef(k2.KeyRef)) }) {
		t.Fatalf("after the session dropped mid-roll, the peer's carried keys %v lack k2 (Current_key, pkt_good>0 on the session); status at the switch: current=%s counters.carried=%v",
			refsOf(carried), last.Current, last.Counters.Carried)
	}
	if got := us.Carried(); !slices.ContainsFunc(got, func(r tcpao.KeyRef) bool { return r.SendID == 2 }) {
		t.Fatalf("Carried() %v lacks k2", got)
	}
}

func refsOf(ks []CarriedKey) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Ref.String())
	}
	return out
}
