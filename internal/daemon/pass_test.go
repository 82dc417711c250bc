package daemon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestIdlePassTouchesNothing: key source reads that find nothing new run
// idle passes, which read no socket and evaluate nothing; a changed input
// (here a kick, as for a session event or SIGHUP) runs a full pass, which
// re-reads the listener and puts back what drifted.
func TestIdlePassTouchesNothing(t *testing.T) { synctest.Test(t, testIdlePassTouchesNothing) }

func testIdlePassTouchesNothing(t *testing.T) {
	e, k1, k2 := steadyEnv(t, 5*time.Millisecond)

	// Let start-up's passes finish, then take k2 off the listener behind
	// the daemon's back: a pass that read the listener would put it back.
	e.waitFor("idle passes", func() bool { idle, _ := e.d.Passes(); return idle >= 3 })
	_, full0 := e.d.Passes()
	if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k2.mkt().Key(peerHost, 0).KeyRef}); err != nil {
		t.Fatal(err)
	}
	reads0, writes0 := e.lisC.calls()
	idle0, _ := e.d.Passes()
	e.waitFor("20 more idle passes", func() bool { idle, _ := e.d.Passes(); return idle >= idle0+20 })
	idle1, full1 := e.d.Passes()
	reads1, writes1 := e.lisC.calls()
	if full1 != full0 {
		t.Errorf("%d full passes while nothing changed (%d idle ones)", full1-full0, idle1-idle0)
	}
	if reads1 != reads0 || writes1 != writes0 {
		t.Errorf("idle passes read the listener %d times and wrote it %d times, want neither", reads1-reads0, writes1-writes0)
	}
	if got := keyIDs(t, e.lis); len(got) != 1 {
		t.Errorf("listener keys %v: an idle pass put k2 back", got)
	}

	e.d.Kick()
	e.waitKeys("listener after a full pass", e.lis, ids(k1, k2))
	if _, full := e.d.Passes(); full <= full1 {
		t.Errorf("full passes %d after the kick, want more than %d", full, full1)
	}
	if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
		t.Errorf("exchange: %v", err)
	}
}

// steadyEnv is a daemon reading its key source every refresh, with its
// listener keyed and its one session up and steady on k1 and k2.
func steadyEnv(tb testing.TB, refresh time.Duration) (e *env, k1, k2 testKey) {
	tb.Helper()
	_, k1, k2, _ = testKeys()
	e = newEnv(tb, envOptions{keys: []testKey{k1, k2}, refresh: refresh})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	return e, k1, k2
}

// TestSessionEventsRecomputeNothing: a session taken over on its own event
// and a session going down run no full pass (a mass take-over must not cost
// a fleet-wide recompute per session).
func TestSessionEventsRecomputeNothing(t *testing.T) {
	synctest.Test(t, testSessionEventsRecomputeNothing)
}

func testSessionEventsRecomputeNothing(t *testing.T) {
	_, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.waitFor("the first full pass", func() bool { _, full := e.d.Passes(); return full >= 1 })
	_, full0 := e.d.Passes()
	e.up(ids(k1, k2), k2, k1)
	down := e.session
	down.State = bgp.StateIdle
	e.sp.Set(down)
	e.waitFor("the session down", func() bool { return e.peerStatus().SessionState != "established" })
	// Whatever the two events started in the background has run by now.
	e.quiet(time.Second)
	if _, full := e.d.Passes(); full != full0 {
		t.Errorf("%d full passes for one session up and down, want none", full-full0)
	}
}
