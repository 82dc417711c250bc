package rotator

import (
	"strings"
	"testing"
)

// Traces the model found, and the never-strand cases in the model's events
// (a lifetime's end, an edit in place), replayed on the real machine
// without the model's states: each must run without a dropped segment or a
// refused reconnect and end as said.
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
	}, {
		// A's lifetime ends at end 0 while its roll waits for end 1, which
		// never gets B: end 0's listener keeps A, which its session
		// carries, and end 1 reconnects through it with A (the replay
		// fails on a refused connect). Before the never-strand rule the
		// listener dropped A at once.
		name: "lagging peer: the old key's lifetime ends mid-roll",
		trace: `EV deliver 0 1
EV step 0
EV expire 0 2
EV step 0
EV reconnect 1
EV step 0
EV lsync 0`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.ln[0] != modelA|modelB || s.cur != [2]int{modelA, modelA} {
				t.Errorf("after the reconnect: %s, want A on end 0's listener beside B and A current on both ends", s)
			}
		},
	}, {
		// The only key's lifetime ends at end 0, no successor: the
		// session and the listener keep A, end 1 reconnects with it.
		name: "the only key's lifetime ends",
		trace: `EV expire 0 4
EV step 0
EV reconnect 1
EV step 0
EV step 1`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.keys != [2]int{modelA, modelA} || s.ln[0] != modelA || s.st != [2]State{StateSteady, StateSteady} {
				t.Errorf("after the reconnect: %s, want A alone on both sessions and end 0's listener, both steady", s)
			}
		},
	}, {
		// A's secret is edited in place at end 0 before its roll: no
		// socket of end 0 takes the new material, end 1 reconnects with
		// the old A.
		name: "the old key edited in place before the roll",
		trace: `EV edit 0
EV step 0
EV reconnect 1
EV deliver 0 1
EV step 0
EV send 0
EV recv 0
EV lsync 0`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.keys[0] != modelA|modelB || s.ln[0] != modelA|modelB || s.keys[1] != modelA || s.edited[0] != 1 {
				t.Errorf("after the edit and a reconnect: %s, want the installed A (not A') on end 0's session and listener", s)
			}
		},
	}, {
		// The same edit once both ends send with B and a reconnect left
		// A unused on end 0's session (pkt_good 0, neither Current_key
		// nor RNext_key) and its listener (no SYN verified with it): A
		// authenticated nothing, so the edit takes effect on the
		// listener at once, and on the session once end 1 is seen to
		// choose Current_key (two reads of end 0's, then a segment of
		// end 1's): A' beside B, and the session carries on with B.
		name: "the old key edited in place after the roll: it authenticated nothing",
		trace: `EV deliver 0 1
EV deliver 1 1
EV step 0
EV step 1
EV send 1
EV recv 1
EV step 0
EV send 0
EV recv 0
EV step 1
EV step 0
EV step 1
EV reconnect 1
EV step 0
EV step 1
EV edit 0
EV step 0
EV send 1
EV recv 1
EV step 0
EV send 1
EV recv 1
EV step 0
EV send 0
EV recv 0
EV send 1
EV recv 1`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.keys != [2]int{modelAEdited | modelB, modelA | modelB} || s.ln[0] != modelAEdited|modelB || s.cur != [2]int{modelB, modelB} {
				t.Errorf("after the edit: %s, want A' beside B on end 0's session and listener, the old A on end 1's, B current on both", s)
			}
		},
	}, {
		// The edit while end 1's RNext still names A (spin found it:
		// mutant_edit_unsettled). End 1 aborted its roll to B and put
		// RNext back to A; end 0 switched to B itself (a segment of end
		// 1's verified with B) and then restarted: its A has pkt_good 0
		// and is neither Current_key nor RNext_key. Applied then, end
		// 0's Current_key would follow end 1's RNext to A', whose
		// segments end 1 drops: it is held back until end 0 sees end 1
		// choose, and end 1's next segment moves Current_key back to A.
		name: "an edit held while the peer's RNext still names the old key",
		trace: `EV edit 0
EV reconnect 1
EV deliver 0 1
EV step 0
EV deliver 1 1
EV step 1
EV timeout 1
EV send 0
EV recv 0
EV send 1
EV recv 1
EV step 0
EV lose-record 0
EV step 0
EV step 0
EV send 1
EV recv 1
EV step 0
EV send 0
EV recv 0`,
		after: func(t *testing.T, r *replay) {
			s := r.state()
			if s.keys[0] != modelA|modelB || s.cur[0] != modelA || s.ln[0] != modelA|modelB {
				t.Errorf("after the edit: %s, want the installed A on end 0's session, Current_key again, and on its listener", s)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("TRACE 0\nEV init\nST steady steady 1 1 1 1 1 1 1 1 0 0 0 0 0 1\n")
			for _, l := range strings.Split(c.trace, "\n") {
				b.WriteString(l + "\nST steady steady 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
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
