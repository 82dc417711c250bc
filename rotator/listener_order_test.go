package rotator

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ListenerBatches retires peers in the order the kernel lists their old
// keys (newest installed first), whatever order the desired keys come in,
// and keeps each peer's add right before its delete.
func TestListenerBatchesNewestFirst(t *testing.T) {
	const peers = 7
	pfx := func(i int) string {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 32).String()
	}
	lis := newListener()
	d := Desired{Socket: "lis", Kind: Listening}
	for i := range peers {
		if err := lis.AddKey(mkKey(pfx(i), 1, 1, "old"), tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Desired in the reverse of the listing order, so that the plan's
	// add order and the listing order differ.
	for i := peers - 1; i >= 0; i-- {
		d.Keys = append(d.Keys, dk(mkKey(pfx(i), 2, 2, "new")))
	}
	// A peer that only gains a key goes last.
	d.Keys = append(d.Keys, dk(mkKey(pfx(peers), 2, 2, "new")))
	obs := observe(t, lis)
	var listed []netip.Prefix
	for _, k := range obs.Keys {
		listed = append(listed, k.Peer)
	}
	for _, per := range []int{1, 3, 64} {
		var got []netip.Prefix
		for _, b := range ListenerBatches(PlanSocket(d, obs), per) {
			for i, op := range b {
				if op.Kind == OpDel {
					if i == 0 || b[i-1].Kind != OpAdd || b[i-1].Ref().Peer != op.Ref().Peer {
						t.Fatalf("per=%d: delete not right after its peer's add: %s", per, op.Line())
					}
					got = append(got, op.Ref().Peer)
				}
			}
			if last := b[len(b)-1]; last.Kind == OpAdd && last.Ref().Peer.String() != pfx(peers) {
				t.Fatalf("per=%d: batch ends with an add for %s", per, last.Ref().Peer)
			}
		}
		if len(got) != len(listed) {
			t.Fatalf("per=%d: %d deletes, want %d", per, len(got), len(listed))
		}
		for i := range got {
			if got[i] != listed[i] {
				t.Fatalf("per=%d: delete order %v, want the kernel's listing order %v", per, got, listed)
			}
		}
	}
}
