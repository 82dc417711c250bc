package daemon

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
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

// TestRollJournalBytesPerPeer: the journal keeps up to maxRollSteps steps
// of every peer, thousands of peers: a roll's five steps (session up,
// started, announced, switched, completed) cost about 1,000 bytes a peer
// at 104 bytes a step, 2.2 MiB at 4,096 peers; stored in 32 bytes, under
// 512 (the map's share included).
func TestRollJournalBytesPerPeer(t *testing.T) {
	const peers = 2000
	ids := make([]rotator.PeerID, peers)
	for i := range ids {
		ids[i] = peer.KeyOf(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), "")
	}
	live := testkit.LiveHeap
	var j rollJournal
	j.init()
	before := live()
	at := time.Now()
	pend := rotator.Event{HavePending: true, Pending: tcpao.KeyRef{SendID: 2, RecvID: 2}, At: at}
	for _, id := range ids {
		for _, e := range []rotator.Event{
			{Kind: rotator.EventState, From: rotator.StateSteady, State: rotator.StateSteady},
			{Kind: rotator.EventRollStarted, From: rotator.StateSteady, State: rotator.StateSteady},
			{Kind: rotator.EventState, From: rotator.StateSteady, State: rotator.StateAnnounced},
			{Kind: rotator.EventState, From: rotator.StateAnnounced, State: rotator.StateGrace},
			{Kind: rotator.EventRollCompleted, From: rotator.StateGrace, State: rotator.StateGrace, Current: rotator.ID(2)},
		} {
			e.Peer, e.At, e.HavePending, e.Pending = id, at, pend.HavePending, pend.Pending
			j.event(e)
		}
	}
	per := float64(live()-before) / peers
	if steps, _ := j.after(ids[peers-1], 0); len(steps) != 5 {
		t.Fatalf("%d steps kept, want 5", len(steps))
	}
	runtime.KeepAlive(&j)
	if per > 512 {
		t.Errorf("the journal takes %.0f bytes a peer for a roll's five steps: want at most 512", per)
	}
	t.Logf("%.0f bytes a peer", per)
}

// A stored step gives back the step it stored: every kind and state, a
// state none of stepStates names, the time, the reason and the detail.
func TestRollJournalStoredStep(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	var in []journalStep
	for _, k := range stepKinds {
		for _, st := range append(stepStates[:], "elsewhere") {
			in = append(in, journalStep{seq: 7, at: at, kind: k, state: st, send: 3, recv: 4, key: bothIDs})
		}
	}
	in = append(in, journalStep{seq: 8, kind: control.RollAborted, state: rotator.StateAnnounced, reason: "switch-timeout", detail: "peer did not send", key: noKey},
		journalStep{seq: 9, at: at, kind: control.RollSessionDown, state: rotator.StateDown, reason: "hold timer expired"})
	for _, s := range in {
		got := s.store().step()
		if got != s || !got.at.Equal(s.at) {
			t.Errorf("stored %+v, got back %+v", s, got)
		}
	}
	if n := unsafe.Sizeof(storedStep{}); n > 32 {
		t.Errorf("storedStep is %d bytes, want at most 32", n)
	}
}
