package rotator

import (
	"testing"

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
