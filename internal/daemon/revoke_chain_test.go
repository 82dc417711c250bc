package daemon_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/internal/control"
)

// twoChainPolicy binds the test neighbor to chain core and the second
// neighbor to chain edge.
const twoChainPolicy = `version: 1
safety:
  switch_timeout: 5m
  on_revoke_only_key: keep
key_chains:
  - name: core
  - name: edge
peers:
  - neighbor: 192.0.2.2
    key_chain: core
  - neighbor: 192.0.2.3
    key_chain: edge
`

// A global revoke removes the revoked key, not every key that happens to
// carry its IDs: another chain's key with the same send/recv IDs (and its
// own secret) is that chain's peers' key, here the only one.
func TestRevokeStaysInItsChain(t *testing.T) { synctest.Test(t, testRevokeStaysInItsChain) }

func testRevokeStaysInItsChain(t *testing.T) {
	_, k1, k2, _ := testKeys()
	edge := k1
	edge.name, edge.chain, edge.secret = "e1", "edge", "daemon-test-secret-e1-Pw5"
	e := newEnv(t, envOptions{keys: []testKey{k1, k2, edge}, policy: twoChainPolicy})
	e.waitPeerKeys("start", peerHost, ids(k1, k2))
	e.waitPeerKeys("start", otherHost, ids(edge))
	e.up(ids(k1, k2), k2, k1)

	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	for _, s := range res.Sockets {
		if s.Peer == otherHost.String() || s.Peer == otherAddr.String() {
			t.Errorf("revoke of %s/%s touched chain edge's peer: %+v", chainName, k1.name, s)
		}
	}
	check := func(when string) {
		t.Helper()
		if got := keysFor(t, e.lis, otherHost); !slices.Equal(got, ids(edge)) {
			t.Errorf("%s: listener keys of %s (chain edge) %v, want %v", when, otherAddr, got, ids(edge))
		}
		if got := keysFor(t, e.lis, peerHost); !slices.Equal(got, ids(k2)) {
			t.Errorf("%s: listener keys of %s %v, want %v", when, peerAddr, got, ids(k2))
		}
		if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k2)) {
			t.Errorf("%s: session keys %v, want %v", when, got, ids(k2))
		}
	}
	check("after revoke")
}
