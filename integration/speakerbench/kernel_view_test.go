package speakerbench

import (
	"net/netip"
	"testing"
	"time"
)

// TestKernelViewPredicates: the listener's keys for a peer are those of
// every prefix that covers it, and a predicate holds on the peer's
// established sockets (all of them, at least one) and on those keys.
func TestKernelViewPredicates(t *testing.T) {
	peer, other := netip.MustParseAddr("10.1.0.7"), netip.MustParseAddr("10.1.0.8")
	kv := kernelView{
		est: map[netip.Addr][]sockView{
			peer:  {{current: 2, haveCur: true, ids: map[uint8]bool{2: true, 3: true}}},
			other: {{current: 1, haveCur: true, ids: map[uint8]bool{1: true, 2: true, 3: true}}},
		},
		listener: map[netip.Prefix]map[uint8]bool{
			netip.MustParsePrefix("10.1.0.7/32"): {2: true},
			netip.MustParsePrefix("10.1.0.0/16"): {3: true},
			netip.MustParsePrefix("10.1.0.8/32"): {1: true, 2: true},
		},
	}
	if got := kv.listenerIDs(peer); len(got) != 2 || !got[2] || !got[3] {
		t.Errorf("listenerIDs(%s) = %v, want 2 and 3 (its /32 and the /16)", peer, got)
	}
	cases := []struct {
		name string
		p    pred
		peer netip.Addr
		want bool
	}{
		{"rolled", rolled(1, 2), peer, true},
		{"not rolled: k1 on the socket and the listener", rolled(1, 2), other, false},
		{"switched", switched(2), peer, true},
		{"listener rolled, socket not", listenerRolled(1, 2), other, false},
		{"listener rolled", listenerRolled(1, 2), peer, true},
		{"carries k2 and k3, k2 current", carries(2, 2, 3), peer, true},
		{"clean of k1", clean(1), peer, true},
		{"clean of k1: it is on the listener", clean(1), other, false},
		{"no established socket", switched(2), netip.MustParseAddr("10.1.0.9"), false},
		{"listener alone needs no socket", listenerRolled(1, 3), netip.MustParseAddr("10.1.0.9"), true},
	}
	for _, c := range cases {
		if got := kv.holds(c.peer, c.p); got != c.want {
			t.Errorf("%s: holds = %t, want %t", c.name, got, c.want)
		}
	}
}

// A peer is seen in a state when its own sockets were read, the last of
// them: not when the read of every pending peer's ended, which at N=512
// came up to a second later and put every fleet peer at the end of it.
func TestKernelViewSeenAt(t *testing.T) {
	base := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	end := base.Add(time.Second)
	a, b, c := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("10.1.0.3")
	kv := kernelView{est: map[netip.Addr][]sockView{
		a: {{at: base.Add(10 * time.Millisecond)}},
		b: {{at: base.Add(30 * time.Millisecond)}, {at: base.Add(20 * time.Millisecond)}},
	}}
	for _, tc := range []struct {
		peer netip.Addr
		want time.Time
	}{{a, base.Add(10 * time.Millisecond)}, {b, base.Add(30 * time.Millisecond)}, {c, end}} {
		if got := kv.seenAt(tc.peer, end); !got.Equal(tc.want) {
			t.Errorf("seenAt(%s) = %s, want %s", tc.peer, got.Sub(base), tc.want.Sub(base))
		}
	}
}
