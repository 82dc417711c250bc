package daemon_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// earlyKeys are the keys of the aoctl rotate tests: k1 is the schedule's
// key (sent with since an hour ago), k2's send start is half an hour
// ahead and k3's an hour ahead; all three are accepted from the start.
func earlyKeys() (k1, k2, k3 testKey) {
	now := time.Now()
	k1 = testKey{name: "k1", send: 20, recv: 21, secret: "early-test-secret-k1-Hd3", sendStart: now.Add(-time.Hour)}
	k2 = testKey{name: "k2", send: 30, recv: 31, secret: "early-test-secret-k2-Wq8", sendStart: now.Add(30 * time.Minute)}
	k3 = testKey{name: "k3", send: 40, recv: 41, secret: "early-test-secret-k3-Pz5", sendStart: now.Add(time.Hour)}
	return k1, k2, k3
}

// rotate is aoctl rotate of the test peer: it must start a roll to k. It
// returns the sequence number the roll's steps follow.
func (e *env) rotate(k testKey) uint64 {
	e.t.Helper()
	res, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()})
	if err != nil {
		e.t.Fatalf("Rotate: %v", err)
	}
	if len(res.Peers) != 1 || !res.Peers[0].Started || !strings.Contains(res.Peers[0].Detail, "rolling to "+chainName+"/"+k.name) {
		e.t.Fatalf("Rotate: %+v, want a roll to %s/%s started", res.Peers, chainName, k.name)
	}
	return res.Peers[0].Seq
}

// rollSteps are the test peer's roll steps after seq, and the sequence
// number of the last one (seq when there is none).
func (e *env) rollSteps(seq uint64) ([]control.RollStep, uint64) {
	e.t.Helper()
	rep, err := e.d.Rolls(context.Background(), control.RollsRequest{Peer: peerAddr.String(), After: seq})
	if err != nil {
		e.t.Fatalf("Rolls: %v", err)
	}
	return rep.Steps, rep.Last
}

// earlyIs fails the test unless status shows the peer's aoctl rotate for k
// in state, its end (if any) saying why.
func (e *env) earlyIs(k testKey, state, why string) {
	e.t.Helper()
	er := e.peerStatus().EarlyRoll
	switch {
	case er == nil:
		e.t.Fatalf("status shows no aoctl rotate, want it %s to %s", state, k.name)
	case er.State != state || er.Key.String() != chainName+"/"+k.name || !er.KeyStart.Equal(k.sendStart) || !strings.Contains(er.Ended, why):
		e.t.Fatalf("status shows aoctl rotate %+v, want it %s to %s/%s (send start %s), ended %q", er, state, chainName, k.name, k.sendStart, why)
	}
}

// noRollTo fails the test if a step after seq announced a key, aborted
// or named one of keys: a change of the session's key set (a key installed
// accept-only, one retired) is a roll too, which stays on the key sent
// with.
func (e *env) noRollTo(seq uint64, when string, keys ...testKey) {
	e.t.Helper()
	steps, _ := e.rollSteps(seq)
	for _, s := range steps {
		if s.Step == control.RollAnnounced || s.Step == control.RollAborted ||
			s.Key != nil && slices.ContainsFunc(keys, func(k testKey) bool { return s.Key.Name == k.name }) {
			e.t.Fatalf("%s: roll steps %v (%s names %v), want no roll to %v", when, stepKinds(steps), s.Step, s.Key, names(keys))
		}
	}
}

func names(keys []testKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.name)
	}
	return out
}

func stepKinds(steps []control.RollStep) []control.RollStepKind {
	var out []control.RollStepKind
	for _, s := range steps {
		out = append(out, s.Step)
	}
	return out
}

// followTo has the remote router ask for k with its RNext and exchanges
// segments until the session sends with k, the remote router does too and
// the roll after seq has completed; it returns the last step's sequence
// number.
func (e *env) followTo(k testKey, seq uint64) uint64 {
	e.t.Helper()
	r := k.send
	if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
		e.t.Fatal(err)
	}
	var steps []control.RollStep
	e.waitFor("the roll to "+k.name+" to complete", func() bool {
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			e.t.Fatalf("exchange during the roll: %v", err)
		}
		var more []control.RollStep
		more, seq = e.rollSteps(seq)
		steps = append(steps, more...)
		i, c := info(e.t, e.acc), info(e.t, e.client)
		return i.CurrentKey == k.send && i.RNextKey == k.recv && c.CurrentKey == k.recv &&
			slices.ContainsFunc(steps, func(s control.RollStep) bool { return s.Step == control.RollCompleted })
	})
	if slices.ContainsFunc(steps, func(s control.RollStep) bool { return s.Step == control.RollAborted }) {
		e.t.Fatalf("the roll to %s: steps %v, want none aborted", k.name, stepKinds(steps))
	}
	return seq
}

// holdsKey fails the test unless the session sends with k and asks the
// remote router for k (its Current_key and RNext_key).
func (e *env) holdsKey(k testKey, when string) {
	e.t.Helper()
	if i := info(e.t, e.acc); i.CurrentKey != k.send || i.RNextKey != k.recv {
		e.t.Fatalf("%s: session current=%d rnext=%d, want %s's %d/%d", when, i.CurrentKey, i.RNextKey, k.name, k.send, k.recv)
	}
}

// aoctl rotate rolls to the key that is newest when the operator asks,
// once: a key added after that roll completed, with a send start ahead,
// is not rolled to until the operator asks again (or the schedule
// reaches it). The daemon had kept rolling to whatever key was newest
// for as long as the schedule had not caught up with the first one.
func TestRotateRollsToTheNewestKeyWhenAsked(t *testing.T) {
	synctest.Test(t, testRotateRollsToTheNewestKeyWhenAsked)
}

func testRotateRollsToTheNewestKeyWhenAsked(t *testing.T) {
	k1, k2, k3 := earlyKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.keys = append(e.keys, k3) // its secret is looked for in the log too
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1) // the remote router sends with k1
	e.holdsKey(k1, "setup")

	seq := e.rotate(k2)
	e.earlyIs(k2, control.EarlyRolling, "")
	seq = e.followTo(k2, seq)
	e.holdsKey(k2, "after the roll to k2")
	e.earlyIs(k2, control.EarlyHeld, "")
	pl, err := e.d.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pl.Upcoming, func(ev control.Event) bool {
		return ev.At.Equal(k2.sendStart) && strings.Contains(ev.Action, "aoctl rotate's early roll to core/k2 ends")
	}) {
		t.Errorf("plan's upcoming %+v: want the end of aoctl rotate's hold on k2 at its send start", pl.Upcoming)
	}

	// k3 comes, its send start an hour ahead; the far end lacks it yet.
	e.refreshWith(k1, k2, k3)
	e.waitKeys("session (k3 accept-only, as the schedule has it)", e.acc, ids(k1, k2, k3))
	_, full := e.d.Passes()
	for range 5 {
		e.d.Kick()
		e.quiet(10 * time.Second)
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange after k3 came: %v", err)
		}
		e.holdsKey(k2, "after k3 came, nobody asking for it")
	}
	if _, now := e.d.Passes(); now < full+5 {
		t.Fatalf("%d full passes after k3 came, want at least 5 (else this test proves nothing)", now-full)
	}
	e.noRollTo(seq, "after k3 came, nobody asking for it", k3)
	if st := e.peerStatus().Rotation; st.State != "steady" || st.PendingKey != "" {
		t.Errorf("rotation %+v, want steady with nothing pending", st)
	}

	// The far end gets k3 and the operator asks again: now the roll goes
	// to k3.
	m := k3.mirror()
	if err := e.client.AddKey(m, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Secret.Zero()
	e.followTo(k3, e.rotate(k3))
	e.holdsKey(k3, "after the second rotate")
	e.earlyIs(k3, control.EarlyHeld, "")
}

// The key aoctl rotate named leaves the key source before any pass rolled
// to it: no roll happens, to it or to the key that is newest now.
func TestRotateTargetGoneBeforeTheRoll(t *testing.T) {
	synctest.Test(t, testRotateTargetGoneBeforeTheRoll)
}

func testRotateTargetGoneBeforeTheRoll(t *testing.T) {
	k1, k2, k3 := earlyKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.keys = append(e.keys, k3)
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	e.holdsKey(k1, "setup")

	// A pass hangs in its read of the listener: the one after it is the
	// first to see the rotate's request, and by then k2 is gone.
	release := make(chan struct{})
	e.lisC.mu.Lock()
	e.lisC.stall = release
	e.lisC.mu.Unlock()
	e.d.Kick()
	e.waitFor("a pass to hang on the listener", func() bool {
		e.lisC.mu.Lock()
		defer e.lisC.mu.Unlock()
		return e.lisC.stall == nil
	})
	seq := e.rotate(k2)
	e.refreshWith(k1, k3) // k2 leaves; k3, newer than k1, comes
	close(release)

	e.waitKeys("listener (k2 gone, k3 accept-only)", e.lis, ids(k1, k3))
	for range 5 {
		e.d.Kick()
		e.quiet(10 * time.Second)
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange after k2 left: %v", err)
		}
		e.holdsKey(k1, "after the rotate's key left the source")
	}
	e.noRollTo(seq, "after the rotate's key left the source", k2, k3)
	e.earlyIs(k2, control.EarlyEnded, "no longer one of the peer's keys")
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k1, k3)) {
		t.Errorf("session keys %v, want %v (k2 gone, k3 accept-only)", got, ids(k1, k3))
	}
}

// A roll aoctl rotate started that aborts (the far end lacks the key) is
// not retried behind the operator's back: the roll failed, rotate --wait
// says so, the schedule governs again, and the operator runs aoctl rotate
// again when the far end has the key.
func TestRotateAbortedIsNotRetried(t *testing.T) {
	synctest.Test(t, testRotateAbortedIsNotRetried)
}

func testRotateAbortedIsNotRetried(t *testing.T) {
	k1, k2, _ := earlyKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k1) // the far end lacks k2
	e.holdsKey(k1, "setup")

	seq := e.rotate(k2)
	var steps []control.RollStep
	e.waitFor("the roll to abort", func() bool {
		var more []control.RollStep
		more, seq = e.rollSteps(seq)
		steps = append(steps, more...)
		return slices.ContainsFunc(steps, func(s control.RollStep) bool { return s.Step == control.RollAborted })
	})
	// The env's backoff is 50ms to 200ms: a minute is hundreds of retries.
	for range 6 {
		e.quiet(10 * time.Second)
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange after the abort: %v", err)
		}
		e.holdsKey(k1, "after the rotate's roll aborted")
	}
	e.noRollTo(seq, "after the rotate's roll aborted (no retry nobody asked for)", k2)
	e.earlyIs(k2, control.EarlyEnded, "the roll to it aborted (switch-timeout)")

	// The far end gets k2; the operator asks again.
	m := k2.mirror()
	if err := e.client.AddKey(m, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Secret.Zero()
	e.followTo(k2, e.rotate(k2))
}
