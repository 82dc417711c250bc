package daemon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestRotateSurvivesRestart: aoctl rotate's early roll survives a
// restart of aokeyd on the same state directory (every package upgrade
// does one), and ends after it exactly as it would have without it.
// Before the early-roll record the restarted daemon had forgotten the
// request and rolled the session back to the schedule's k1 (held: "after
// the restart: session current=30 rnext=21, want k2's 30/31"; rolling:
// "status shows no aoctl rotate, want it rolling to k2").
func TestRotateSurvivesRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		// The peer rolled to k2 ahead of k2's send start: after the
		// restart it keeps sending with k2, no roll back to k1, and status
		// shows the request as the operator made it.
		{"held", testRotateSurvivesRestartHeld},
		// aokeyd stops mid-roll: after the restart the roll to k2 goes on
		// and completes when the peer follows.
		{"rolling", testRotateSurvivesRestartRolling},
		// aokeyd stops mid-roll and the peer never follows: the request
		// ends when the roll would have aborted, and the schedule governs.
		{"rolling, not followed", testRotateRestartNotFollowed},
		// aokeyd stops mid-roll and the session goes down and comes back
		// meanwhile: the request ended with it, as when aokeyd runs.
		{"rolling, session down meanwhile", testRotateRestartSessionDown},
	} {
		t.Run(c.name, func(t *testing.T) { synctest.Test(t, c.f) })
	}
}

func testRotateSurvivesRestartHeld(t *testing.T) {
	k1, k2, _ := earlyKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	e.holdsKey(k1, "setup")
	e.followTo(k2, e.rotate(k2))
	e.earlyIs(k2, control.EarlyHeld, "")
	asked := e.peerStatus().EarlyRoll.AskedAt

	e.restart()
	e.staysOn(k2, k1, "after the restart")
	e.earlyIs(k2, control.EarlyHeld, "")
	if got := e.peerStatus().EarlyRoll.AskedAt; !got.Equal(asked) {
		t.Errorf("after the restart status says aoctl rotate was asked at %s, want %s", got, asked)
	}
	// A second restart with nothing changed in between: the same.
	e.restart()
	e.staysOn(k2, k1, "after a second restart")
	e.earlyIs(k2, control.EarlyHeld, "")
	if ws := e.warningsOf(); hasWarning(ws, []string{"early-roll record"}) {
		t.Errorf("status warns of the early-roll record: %q", ws)
	}
}

// rolledMidway starts an env whose session is announcing k2 after aoctl
// rotate, the peer not following yet, and restarts aokeyd.
func rolledMidway(t *testing.T, switchTimeout time.Duration) (e *env, k1, k2 testKey) {
	k1, k2, _ = earlyKeys()
	e = newEnv(t, envOptions{keys: []testKey{k1, k2}, switchTimeout: switchTimeout})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	e.holdsKey(k1, "setup")
	e.rotate(k2)
	e.waitFor("the roll to k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
	return e, k1, k2
}

func testRotateSurvivesRestartRolling(t *testing.T) {
	e, k1, k2 := rolledMidway(t, time.Hour)
	e.restart()
	e.earlyIs(k2, control.EarlyRolling, "")
	// The peer follows: its RNext asks for k2.
	r := k2.send
	if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the request held", func() bool {
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange: %v", err)
		}
		time.Sleep(time.Second) // the steady machine reads every 30s
		er := e.peerStatus().EarlyRoll
		return er != nil && er.State == control.EarlyHeld
	})
	e.holdsKey(k2, "after the roll that went on across the restart")
	// Held: what a later restart finds, and what a session going down
	// does not end.
	e.restart()
	e.staysOn(k2, k1, "after a restart once the roll went on")
	e.earlyIs(k2, control.EarlyHeld, "")
}

func testRotateRestartNotFollowed(t *testing.T) {
	e, k1, k2 := rolledMidway(t, time.Minute)
	asked := e.peerStatus().EarlyRoll.AskedAt
	e.restart()
	e.earlyIs(k2, control.EarlyRolling, "")
	time.Sleep(time.Until(asked.Add(time.Minute)))
	e.waitFor("the request ended at the switch timeout", func() bool {
		er := e.peerStatus().EarlyRoll
		return er != nil && er.State == control.EarlyEnded
	})
	e.earlyIs(k2, control.EarlyEnded, "did not complete within the switch timeout")
	e.waitFor("the session announcing k1 again", func() bool { return info(t, e.acc).RNextKey == k1.recv })
	e.restart()
	e.staysOn(k1, k2, "after a restart once the request ended")
	if er := e.peerStatus().EarlyRoll; er != nil {
		t.Errorf("after a restart status shows aoctl rotate %+v, want none (it ended)", er)
	}
}

func testRotateRestartSessionDown(t *testing.T) {
	e, k1, k2 := rolledMidway(t, time.Hour)
	e.stop()
	e.connect(k2, k1) // a new connection; the peer sends with k1 and asks for it
	e.established()
	e.start("")
	e.waitFor("the new session taken over", func() bool { return e.peerStatus().Rotation.State == "steady" })
	e.earlyIs(k2, control.EarlyEnded, "the session went down before the roll to it completed")
	e.staysOn(k1, k2, "on the session after the restart")
}

// restart stops the daemon and starts another on the same state
// directory, the same session up, and waits until it took the session
// over.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.start("")
	e.waitFor("the restarted daemon to take the session over", func() bool {
		st := e.peerStatus().Rotation.State
		return st != "" && st != "down"
	})
}

// staysOn fails the test unless, over several full passes and segment
// exchanges, the session keeps sending with k and no roll step of the
// running daemon announces a key or names old.
func (e *env) staysOn(k, old testKey, when string) {
	e.t.Helper()
	for range 5 {
		e.settle()
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			e.t.Fatalf("%s: exchange: %v", when, err)
		}
		e.holdsKey(k, when)
	}
	e.noRollTo(0, when, old)
}
