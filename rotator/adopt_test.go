package rotator

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestAdoptOneMachinePerSession: the controller alone knows whether a
// machine runs on a session. Two adopters of one session (its event and a
// reconcile pass) start one machine; a new session, or the same one after
// the peer went down, starts another. SetDesired reports whether the
// desired state changed, so a caller never keeps a copy to compare with.
func TestAdoptOneMachinePerSession(t *testing.T) {
	n := tcpaotest.NewNet()
	sock, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewController(Options{})
	defer c.Close()
	p := pid("a")
	d := Desired{Socket: "peer a", Keys: []DesiredKey{{Key: mkKey("192.0.2.2/32", 1, 1, "s1")}}}
	type session struct{ n int }
	s1, s2 := &session{1}, &session{2}
	steps := []struct {
		name         string
		do           func() bool
		want         bool
		runs1, runs2 bool
	}{
		{"first adopter starts", func() bool { ok, _, _ := c.Adopt(p, s1, sock, d); return ok }, true, true, false},
		{"second adopter of the session does not", func() bool { ok, _, _ := c.Adopt(p, s1, sock, d); return ok }, false, true, false},
		{"the same desired state is no change", func() bool { return c.SetDesired(p, d) }, false, true, false},
		{"another key is", func() bool {
			d2 := d
			d2.Keys = append([]DesiredKey{{Key: mkKey("192.0.2.2/32", 2, 2, "s2")}}, d.Keys...)
			return c.SetDesired(p, d2)
		}, true, true, false},
		{"a new session starts another", func() bool { ok, _, _ := c.Adopt(p, s2, sock, d); return ok }, true, false, true},
		{"down: no machine", func() bool { <-c.PeerDown(p); return c.Runs(p, s2) }, false, false, false},
		{"the session again after down", func() bool { ok, _, _ := c.Adopt(p, s2, sock, d); return ok }, true, false, true},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: got %v, want %v", st.name, got, st.want)
		}
		if r1, r2 := c.Runs(p, s1), c.Runs(p, s2); r1 != st.runs1 || r2 != st.runs2 {
			t.Fatalf("%s: Runs(s1)=%v Runs(s2)=%v, want %v %v", st.name, r1, r2, st.runs1, st.runs2)
		}
	}
}
