package daemon_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
)

// TestPlanStepsNameKeys: aoctl plan against the daemon gives each line of
// its plan as a step too, and a step that adds or deletes a key names its
// chain and key (the one key of the snapshot with its IDs), never its
// secret, while the plan's lines stay as their readers match them. The
// daemon used to give lines only.
func TestPlanStepsNameKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k0, k1, k2, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k0, k1}})
		e.waitKeys("listener", e.lis, ids(k0, k1))
		// The listener's writes fail until the plan is read: the add and
		// the delete stay pending whatever the reconcile goroutine does.
		e.lisC.failWrites(syscall.EIO)
		t.Cleanup(func() { e.lisC.failWrites(nil) })
		e.setSourceKeys(k1, k2) // k2 comes, k0 goes
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		rep, err := e.d.Plan(context.Background())
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		if len(rep.Steps) != len(rep.Plan) {
			t.Fatalf("%d steps for %d plan lines:\n%s", len(rep.Steps), len(rep.Plan), strings.Join(rep.Plan, "\n"))
		}
		added, deleted := false, false
		for i, s := range rep.Steps {
			for _, k := range []testKey{k0, k1, k2} {
				if strings.Contains(s.Text, k.secret) || strings.Contains(rep.Plan[i], k.secret) {
					t.Fatalf("step %q shows %s's secret", s.Text, k.name)
				}
			}
			if s.KeyRef == nil {
				continue
			}
			switch {
			case s.Op == "add" && s.KeyRef.SendID == k2.send && s.KeyRef.RecvID == k2.recv:
				added = true
				if s.Chain != chainName || s.Key != k2.name || !strings.Contains(s.Text, " add "+chainName+"/"+k2.name+" send=30 recv=31 ") {
					t.Errorf("add of k2: chain %q key %q text %q, want %s/%s named", s.Chain, s.Key, s.Text, chainName, k2.name)
				}
				if !strings.Contains(rep.Plan[i], " add send=30 recv=31 ") {
					t.Errorf("plan line %q: its readers' form changed", rep.Plan[i])
				}
			case s.Op == "del" && s.KeyRef.SendID == k0.send:
				deleted = true
				if s.Chain != "" || s.Key != "" {
					t.Errorf("del of k0, no longer in the key source: named %s/%s", s.Chain, s.Key)
				}
			}
		}
		if !added || !deleted {
			t.Errorf("plan adds k2: %v, deletes k0: %v; want both:\n%s", added, deleted, strings.Join(rep.Plan, "\n"))
		}
	})
}
