package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
)

// TestRestartKeepsCarriedKeys: what the never-strand rule keeps on the
// listener survives a restart of aokeyd (issue 47). The peer lags on k1
// after k1 left the key source (its lifetime ended mid-roll), so the
// listener keeps k1 as carried; aokeyd is then restarted (memory lost,
// its state directory kept, or lost too) with the session up, or down.
// After the restart's first passes the listener still holds k1 and the
// peer's reconnect with k1 succeeds.
func TestRestartKeepsCarriedKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		down bool // the session goes down before the restart
		lose bool // the carried-keys record is deleted while aokeyd is down
	}{
		{name: "session up"},
		{name: "session up, record lost", lose: true},
		{name: "session down", down: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
				k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
				e := newEnv(t, envOptions{keys: []testKey{k1}, switchTimeout: time.Hour})
				e.waitKeys("listener", e.lis, ids(k1))
				e.up(ids(k1), k1)
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil { // the peer sends with k1
					t.Fatal(err)
				}
				e.refreshWith(k1, k2) // the peer never gets k2
				e.waitFor("the roll to k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
				time.Sleep(time.Until(k1.end) + time.Second)
				e.settle()
				if got := keyIDs(t, e.lis); !slices.Contains(got, k1.ids()) {
					t.Fatalf("before the restart: listener keys %v lack k1 (%s)", got, k1.ids())
				}
				if c.down {
					down := e.sessionInfo()
					down.State = bgp.StateIdle
					e.sp.Set(down)
					e.waitFor("the session down in status", func() bool { return e.peerStatus().Rotation.State == "down" })
					e.settle()
				}

				e.stop()
				if c.lose {
					for _, f := range []string{"carried-keys.json", "carried-keys.json.bak"} {
						if err := os.Remove(filepath.Join(filepath.Dir(e.ownedFile), f)); err != nil && !os.IsNotExist(err) {
							t.Fatal(err)
						}
					}
				}
				e.start("")
				// The first passes after the start, each a full one.
				for range 3 {
					e.settle()
					if got := keyIDs(t, e.lis); !slices.Contains(got, k1.ids()) {
						t.Fatalf("after the restart: listener keys %v lack k1 (%s), which the peer last authenticated with", got, k1.ids())
					}
				}
				if !hasWarning(e.warningsOf(), []string{"core/k1"}) {
					t.Errorf("after the restart no warning names the kept key core/k1: %q", e.warningsOf())
				}
				if err := e.reconnect([]testKey{k1}); err != nil {
					t.Errorf("the peer's reconnect with k1 after the restart failed: %v", err)
				}
			})
		})
	}
}
