package daemon_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
)

// A key the source adds reaches the fleet document within the publisher's
// wake gap of being installed on the session, not at the next refresh:
// the daemon's Changed wakes the publisher.
func TestFleetPublishesKeyChangeWithinWakeGap(t *testing.T) {
	synctest.Test(t, testFleetPublishesKeyChangeWithinWakeGap)
}

func testFleetPublishesKeyChangeWithinWakeGap(t *testing.T) {
	k0, k1, k2, _ := testKeys()
	var mu sync.Mutex
	var p *fleet.Publisher
	wake := func() {
		mu.Lock()
		defer mu.Unlock()
		if p != nil {
			p.Wake()
		}
	}
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, changed: wake})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	_, c := fleetVault(t)
	st := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
	const gap = 200 * time.Millisecond
	mu.Lock()
	p = fleet.NewPublisher(fleet.Options{Store: st, RouterID: "r1", Refresh: time.Hour, WakeGap: gap,
		Status: func(ctx context.Context) (control.StatusReport, error) { return e.d.Status(ctx, "") }, Revoke: e.d.RevokeFleet})
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	synctest.Wait()
	time.Sleep(time.Second) // past the first round's gap

	published := func(ref string) bool {
		docs, _, err := st.Statuses(ctx)
		if err != nil || len(docs) != 1 || len(docs[0].Peers) != 1 {
			return false
		}
		return slices.ContainsFunc(docs[0].Peers[0].Keys, func(k fleet.Key) bool { return k.Ref() == ref })
	}
	if published("core/k0") {
		t.Fatal("k0 published before the source had it")
	}
	e.refreshWith(k0, k1, k2)
	e.waitKeys("session", e.acc, ids(k0, k1, k2))
	installed := time.Now()
	e.waitFor("k0 in the published document", func() bool { return published("core/k0") })
	if d := time.Since(installed); d > gap {
		t.Errorf("k0 published %s after it was installed, want within the wake gap %s", d, gap)
	}
}
