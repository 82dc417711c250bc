package desired

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestSocketSharesSecrets: the desired states of peers with the same keys
// hold one copy of each key's secret, not one per peer (16,384 copies
// and as many finalizers at 4,096 peers x 4 keys); zeroing one peer's
// desired keys leaves the others' as they are.
func TestSocketSharesSecrets(t *testing.T) {
	var pk policy.PeerKeys
	for i, mat := range []string{"share-test-secret-one", "share-test-secret-two"} {
		m := keystore.MKT{Name: mat, SendID: uint8(i + 1), RecvID: uint8(i + 1), Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte(mat))}
		defer m.Secret.Zero()
		pk.Keys = append(pk.Keys, policy.ScheduledKey{MKT: m, Sendable: true})
	}
	snap := &keystore.Snapshot{}
	a := Socket(pk, snap, netip.MustParsePrefix("192.0.2.1/32"), 0, 0, "a", rotator.Established)
	b := Socket(pk, snap, netip.MustParsePrefix("192.0.2.2/32"), 0, 0, "b", rotator.Established)
	if len(a.Keys) != 2 || len(b.Keys) != 2 {
		t.Fatalf("keys %d and %d, want 2", len(a.Keys), len(b.Keys))
	}
	for i := range a.Keys {
		sa, sb := a.Keys[i].Secret.Bytes(), b.Keys[i].Secret.Bytes()
		if &sa[0] != &sb[0] {
			t.Errorf("key %d: two peers' desired states hold two copies of its secret", i)
		}
		if &sa[0] == &pk.Keys[i].MKT.Secret.Bytes()[0] {
			t.Errorf("key %d: the desired state holds the key source's own copy", i)
		}
	}
	for _, k := range a.Keys {
		k.Secret.Zero()
	}
	for i, k := range b.Keys {
		if !k.Secret.Equal(pk.Keys[i].MKT.Secret) {
			t.Errorf("key %d: zeroing one peer's desired keys wiped another's", i)
		}
	}
}
