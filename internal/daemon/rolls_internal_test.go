package daemon

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// The journal makes steps of the rotator's events: one per step of a roll,
// none for the backoff after an abort or the steady after a completion; a
// roll that goes back to steady unfinished was replanned.
func TestRollJournalSteps(t *testing.T) {
	p := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	ev := func(k rotator.EventKind, from, to rotator.State) rotator.Event {
		return rotator.Event{Peer: p, Kind: k, From: from, State: to, At: time.Unix(0, 0)}
	}
	started := ev(rotator.EventRollStarted, rotator.StateSteady, rotator.StateSteady)
	announced := ev(rotator.EventState, rotator.StateSteady, rotator.StateAnnounced)
	grace := ev(rotator.EventState, rotator.StateAnnounced, rotator.StateGrace)
	completed := ev(rotator.EventRollCompleted, rotator.StateGrace, rotator.StateGrace)
	steady := ev(rotator.EventState, rotator.StateGrace, rotator.StateSteady)
	aborted := ev(rotator.EventRollAborted, rotator.StateAnnounced, rotator.StateAnnounced)
	backoff := ev(rotator.EventState, rotator.StateAnnounced, rotator.StateBackoff)
	back := ev(rotator.EventState, rotator.StateAnnounced, rotator.StateSteady)
	up := ev(rotator.EventState, rotator.StateSteady, rotator.StateSteady)
	for _, tc := range []struct {
		name   string
		events []rotator.Event
		want   []control.RollStepKind
	}{
		{"a roll", []rotator.Event{up, started, announced, grace, completed, steady},
			[]control.RollStepKind{control.RollSessionUp, control.RollStarted, control.RollAnnounced, control.RollSwitched, control.RollCompleted}},
		{"an abort", []rotator.Event{started, announced, aborted, backoff},
			[]control.RollStepKind{control.RollStarted, control.RollAnnounced, control.RollAborted}},
		{"new desired keys mid-roll", []rotator.Event{started, announced, back},
			[]control.RollStepKind{control.RollStarted, control.RollAnnounced, control.RollReplanned}},
		{"steady with no roll", []rotator.Event{back}, nil},
		// A roll whose key was installed before (accept-only, by an
		// earlier pass) takes no install step: its first event is the
		// announce. aoctl rotate --wait still shows it start (seen in
		// the guest: "replanned", then "announced" with no "started").
		{"a roll to a key already installed", []rotator.Event{started, back, announced, grace, completed},
			[]control.RollStepKind{control.RollStarted, control.RollReplanned, control.RollStarted, control.RollAnnounced, control.RollSwitched, control.RollCompleted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j rollJournal
			for _, e := range tc.events {
				j.event(e)
			}
			steps, _ := j.after(p, 0)
			var got []control.RollStepKind
			for _, s := range steps {
				got = append(got, s.kind)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("steps %v, want %v", got, tc.want)
			}
		})
	}
}

// The journal keeps a peer's last maxRollSteps steps, numbered across
// peers, and forgets a peer that is gone.
func TestRollJournalBounds(t *testing.T) {
	a, b := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), ""), peer.KeyOf(netip.MustParseAddr("192.0.2.3"), "")
	var j rollJournal
	for i := range 3 * maxRollSteps {
		j.down(a, time.Unix(int64(i), 0), "")
		j.down(b, time.Unix(int64(i), 0), "")
	}
	sa, _ := j.after(a, 0)
	sb, _ := j.after(b, 0)
	if len(sa) != maxRollSteps || len(sb) != maxRollSteps || j.last() != 6*maxRollSteps || sb[len(sb)-1].seq != j.last() {
		t.Errorf("kept %d and %d steps, last %d", len(sa), len(sb), j.last())
	}
	if newer, _ := j.after(a, sa[len(sa)-2].seq); len(newer) != 1 {
		t.Errorf("after the second last: %d steps, want 1", len(newer))
	}
	j.forget(a)
	if sa, _ := j.after(a, 0); len(sa) != 0 {
		t.Errorf("a forgotten peer kept %d steps", len(sa))
	}
}
