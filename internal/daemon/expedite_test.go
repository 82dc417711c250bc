package daemon_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestRevokeExpeditesRCU (kernel.expedite_rcu): a revoke holds RCU
// expedited while it deletes the key from the sessions (each forced delete
// on an established socket waits for a grace period) and releases it
// before it answers; a revoke that touches no session holds nothing.
func TestRevokeExpeditesRCU(t *testing.T) { synctest.Test(t, testRevokeExpeditesRCU) }

func testRevokeExpeditesRCU(t *testing.T) {
	_, k1, k2, _ := testKeys()
	var held, holds atomic.Int32
	expedite := func() func() {
		held.Add(1)
		holds.Add(1)
		return func() { held.Add(-1) }
	}
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: twoPeerPolicy, expedite: expedite,
		revocationsFile: filepath.Join(t.TempDir(), "revocations.json")})
	e.waitPeerKeys("start", peerHost, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil || res.Failed() {
		t.Fatalf("Revoke: %+v, %v", res, err)
	}
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k2)) {
		t.Fatalf("session keys %v, want %v", got, ids(k2))
	}
	if holds.Load() != 1 || held.Load() != 0 {
		t.Errorf("holds %d, held after the revoke %d; want 1, 0", holds.Load(), held.Load())
	}
	// The other peer has no session: a revoke scoped to it holds nothing.
	if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k2.name, Peer: otherAddr.String()}); err != nil {
		t.Fatal(err)
	}
	if holds.Load() != 1 {
		t.Errorf("holds %d after a revoke of no session, want still 1", holds.Load())
	}
}
