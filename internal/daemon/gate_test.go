package daemon_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

// TestStartUpGateIsShown: after a start, until the speaker's sessions are
// listed and each one up is read, the listener sync deletes nothing
// (carried.go's start-up gate). Meanwhile aoctl plan shows the deletes
// the sync holds back and status says that the gate holds; once the
// sessions are listed, both go and the sync deletes.
func TestStartUpGateIsShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k0 := testKey{name: "k0", send: 10, recv: 11, secret: "daemon-test-secret-k0-Xq7"}
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2"}
		e := newEnv(t, envOptions{keys: []testKey{k0, k1}})
		e.waitKeys("listener", e.lis, ids(k0, k1))
		e.stop()
		release := e.sp.HoldSync()
		e.setSourceKeys(k1) // k0 left the key source while aokeyd was down
		e.start("")
		e.settle()
		if got := keyIDs(t, e.lis); !slices.Equal(got, ids(k0, k1)) {
			t.Fatalf("listener keys %v under the start-up gate, want k0 kept (%v)", got, ids(k0, k1))
		}
		held := "listen 192.0.2.1:179 listening held del send=10 recv=11 peer=192.0.2.2/32 async (start-up-gate)"
		if lines := e.listenerPlan(); !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, held) }) {
			t.Errorf("aoctl plan under the start-up gate:\n%s\nhas no line %q", strings.Join(lines, "\n"), held)
		}
		rep, err := e.d.Status(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if g := rep.StartUpGate; g == nil || g.Listed {
			t.Errorf("status under the start-up gate says %+v, want it holding, the sessions not listed", g)
		}

		release()
		e.waitKeys("listener once the sessions are listed", e.lis, ids(k1))
		if lines := e.listenerPlan(); slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "start-up-gate") }) {
			t.Errorf("aoctl plan after the gate:\n%s", strings.Join(lines, "\n"))
		}
		if rep, err := e.d.Status(context.Background(), ""); err != nil || rep.StartUpGate != nil {
			t.Errorf("status after the gate says %+v (%v), want nothing", rep.StartUpGate, err)
		}
	})
}
