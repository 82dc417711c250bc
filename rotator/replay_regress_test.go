package rotator

import (
	"strings"
	"testing"
)

// Traces the model found, replayed on the real machine without the model's
// states: each must run without a dropped segment and end as said.
func TestModelRegressions(t *testing.T) {
	for _, c := range []struct {
		name  string
		trace string
		// after checks the end state (the replay already failed on any
		// dropped segment)
		after func(t *testing.T, r *replay)
	}{{
		// End 0 learns that end 1 holds B from its own Current_key moving
		// to B (end 1's RNext), enters grace, and deleted A at the end of
		// it although end 1 had not yet seen a segment of end 0 naming B:
		// end 1 still sent with A, and end 0 dropped that segment. The
		// model found it once its grace period no longer stood for "long
		// enough for a round trip": retire now waits until the peer is
		// seen sending with the new key.
		name: "retire before the peer sends with the new key",
		trace: `EV deliver 0 1
EV deliver 1 1
EV step 0
EV step 1
EV send 1
EV recv 1
EV step 0
EV deliver 0 2
EV deliver 1 2
EV step 0
EV step 0
EV send 1
EV recv 1
EV send 0
EV recv 0
EV send 1
EV recv 1
EV step 0
EV step 1
EV step 1
EV send 0
EV recv 0
EV step 1
EV step 1
EV step 0`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.keys != [2]int{modelB, modelB} || s.cur != [2]int{modelB, modelB} {
				t.Errorf("after the roll: %s, want only B, current, on both ends", s)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("TRACE 0\nEV init\nST steady steady 1 1 1 1 1 1 1 1 0 0\n")
			for _, l := range strings.Split(c.trace, "\n") {
				b.WriteString(l + "\nST steady steady 0 0 0 0 0 0 0 0 0 0\n")
			}
			traces, err := parseModelTraces(strings.NewReader(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			r := newReplay(t, 0)
			for _, ev := range traces[0].events {
				r.apply(ev)
			}
			c.after(t, r)
		})
	}
}
