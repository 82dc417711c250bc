package rotator

import (
	"log/slog"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestSessionEditWaitsForThePeersChoice: an edit in place of a session
// key that authenticated nothing (pkt_good 0, neither Current_key nor
// RNext_key) takes effect only once the machine has read the socket
// twice, two polls after its own last write of Current_key or RNext_key
// (or its start), and then seen a segment of the peer's: reads that
// wake-ups bring sooner take no base, and without a segment from the
// peer it waits, polling.
func TestSessionEditWaitsForThePeersChoice(t *testing.T) {
	a, a2 := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 1, 1, "alpha-new")
	b := mkKey(peerA, 2, 2, "bravo")
	s := newEstablished(b)
	setup(s.AddKey(a, tcpao.AddOptions{}))
	s.peerSendsWith(b, 1)
	d := Desired{Kind: Established, Keys: []DesiredKey{dk(a2), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}
	m := newMachine(pid("settle"), s, d, testCfg(), nil, nil, slog.New(slog.DiscardHandler), t0)
	poll := testCfg().Poll
	edited := func() bool {
		for _, k := range observe(t, s).Keys {
			if k.SendID == 1 {
				return k.Fingerprint == a2.Secret.Fingerprint()
			}
		}
		return false
	}
	for i, st := range []struct {
		at      time.Duration // since the machine's start
		peer    bool          // a segment of the peer's before the step
		applied bool
	}{
		{0, false, false},                   // the first read
		{time.Millisecond, true, false},     // a wake-up: the second read, too soon for the base
		{2 * time.Millisecond, true, false}, // another: still too soon
		{2 * poll, false, false},            // the base
		{2*poll + time.Millisecond, false, false},
		{3 * poll, true, true}, // a segment since the base: the peer chose
	} {
		if st.peer {
			s.peerSendsWith(b, 1)
		}
		next := m.step(t0.Add(st.at))
		if got := edited(); got != st.applied {
			t.Fatalf("step %d at +%s: edit applied %t, want %t (status %+v)", i+1, st.at, got, st.applied, m.st.Edits)
		}
		if !st.applied && next.After(t0.Add(st.at+poll)) {
			t.Errorf("step %d: next step at %s, want a poll while the edit waits", i+1, next.Sub(t0))
		}
	}
	if cur, _ := s.current(); cur != ID(2) {
		t.Errorf("Current_key %s after the edit, want 2", cur)
	}
}
