package rotator

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestDownWatch: a listener key no session up carries gets its base at the
// first sync that sees it so, keeps it while it stays down, and loses it
// when a session up carries it again or its material changes; the watch
// hands over the keys that verified bad segments since their base.
func TestDownWatch(t *testing.T) {
	a := mkKey("2001:db8::1/128", 1, 1, "alpha")
	a2 := mkKey("2001:db8::1/128", 1, 1, "alpha-new")
	type step struct {
		do    func(s *testSock) // before the sync
		up    bool              // a session up carries a
		fails bool              // the sync hands a over (bad segments since its base)
	}
	syn := func(wrong bool) func(s *testSock) { return func(s *testSock) { synTo(s, a, wrong) } }
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"bad segments after the base", []step{{nil, false, false}, {syn(true), false, true}, {nil, false, true}}},
		{"bad segments before the base only", []step{{syn(true), false, false}, {nil, false, false}}},
		{"up again drops the base", []step{{nil, false, false}, {syn(true), true, false}, {nil, false, false}, {syn(true), false, true}}},
		{"other material drops the base", []step{{nil, false, false}, {syn(true), false, true}, {func(s *testSock) {
			setup(s.DelKey(tcpao.DelKey{KeyRef: a.KeyRef}))
			setup(s.AddKey(a2, tcpao.AddOptions{}))
		}, false, false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newListener()
			setup(s.AddKey(a, tcpao.AddOptions{}))
			var w DownWatch
			for i, st := range c.steps {
				if st.do != nil {
					st.do(s)
				}
				var up []tcpao.KeyRef
				if st.up {
					up = []tcpao.KeyRef{a.KeyRef}
				}
				obs := observe(t, s)
				got := w.observe("listen", &obs, up)
				if fails := len(got) == 1 && got[0].Ref == a.KeyRef; fails != st.fails || len(got) > 1 {
					t.Fatalf("sync %d: handed over %v, want a: %t", i+1, got, st.fails)
				}
			}
			w.Forget(map[SocketID]bool{})
			if len(w.bases) != 0 {
				t.Errorf("bases of a listener that is gone stay: %v", w.bases)
			}
		})
	}
}

// TestDownWatchShrinks: a listener whose keys were all down at once (the
// daemon's start, before the sessions came up) keeps no memory of that
// size once sessions up carry a quarter of them, or all (downSet): a Go
// map keeps its largest buckets.
func TestDownWatchShrinks(t *testing.T) {
	const n = 16384
	obs := Observed{HaveAO: true, Keys: make([]tcpao.KeyInfo, n)}
	up := make([]tcpao.KeyRef, n)
	for i := range obs.Keys {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32)
		obs.Keys[i].KeyRef = tcpao.KeyRef{Peer: p, SendID: 20, RecvID: 21}
		up[i] = obs.Keys[i].KeyRef
	}
	live := testkit.LiveHeap
	var w DownWatch
	base := live()
	w.observe("listen", &obs, nil) // every key down: n bases
	if got := len(w.bases["listen"].keys); got != n {
		t.Fatalf("%d bases, want %d", got, n)
	}
	peak := live() - base
	t.Logf("%d bases: %d bytes", n, peak)
	w.observe("listen", &obs, up[:n/8]) // an eighth up: the set stays
	if set := w.bases["listen"]; set == nil || len(set.keys) != n-n/8 || set.peak != n {
		t.Fatalf("after the first sessions came up: %d bases, peak %d", len(set.keys), set.peak)
	}
	w.observe("listen", &obs, up[:n/4]) // one key in four up: made afresh
	if set := w.bases["listen"]; set == nil || len(set.keys) != n-n/4 || set.peak != n-n/4 {
		t.Fatalf("with a quarter up: %d bases, peak %d", len(set.keys), set.peak)
	}
	three := live() - base
	t.Logf("%d bases made afresh: %d bytes", n-n/4, three)
	if three > peak*5/8 {
		t.Errorf("three quarters of the bases take %d bytes, all of them %d", three, peak)
	}
	w.observe("listen", &obs, up[:n-n/16]) // a sixteenth down
	if set := w.bases["listen"]; set == nil || len(set.keys) != n/16 || set.peak != n/16 {
		t.Fatalf("with a sixteenth down: %d bases, peak %d", len(set.keys), set.peak)
	}
	w.observe("listen", &obs, up) // every session up
	if _, ok := w.bases["listen"]; ok {
		t.Fatal("a listener without bases keeps its entry")
	}
	if left := int64(live()) - int64(base); left > int64(peak/16) {
		t.Errorf("with every key up the watch keeps %d bytes, of %d with every key down", left, peak)
	}
}
