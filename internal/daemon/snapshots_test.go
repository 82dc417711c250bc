package daemon

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// versionSource serves one chain whose version and key bytes the test sets.
type versionSource struct {
	mu      sync.Mutex
	version uint64
	secret  []byte
}

func (s *versionSource) Name() string { return "version-source" }
func (s *versionSource) Read(context.Context) (*keystore.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &keystore.Chain{Name: "core", Version: s.version, Keys: []keystore.MKT{{Name: "k1", Chain: "core", SendID: 1, RecvID: 1,
		Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret(bytes.Clone(s.secret))}}}
	return &keystore.Snapshot{Source: s.Name(), Chains: map[string]*keystore.Chain{"core": c}}, nil
}
func (s *versionSource) Revoke(context.Context, string, string) error { return nil }

func (s *versionSource) set(version uint64, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.secret = version, []byte(secret)
}

// TestSharedSnapshot: readers share one clone until the key source or the
// revocations change; a replaced clone is zeroed when its last reader
// releases it, not before.
func TestSharedSnapshot(t *testing.T) {
	src := &versionSource{}
	src.set(1, "shared-snapshot-secret-one")
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	defer cache.Close()
	d := wire(newCore(Options{Keys: cache}, memRevocations(t), nil, nil, nil))
	if s, release := d.co.shared(); s != nil {
		t.Fatal("a snapshot before the first read")
	} else {
		release()
	}
	if _, err := cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, releaseA := d.co.shared()
	b, releaseB := d.co.shared()
	if a == nil || a != b {
		t.Fatalf("two readers got %p and %p, want one shared snapshot", a, b)
	}
	releaseB()
	keyOf := func(s *keystore.Snapshot) []byte { return s.Chains["core"].Keys[0].Secret.Bytes() }

	// A new chain version: the next reader gets a new clone; the old one
	// stays intact while a holds it.
	src.set(2, "shared-snapshot-secret-two")
	if _, err := cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, releaseC := d.co.shared()
	if c == a || string(keyOf(c)) != "shared-snapshot-secret-two" {
		t.Fatalf("after a source change: same snapshot %t, key %q", c == a, keyOf(c))
	}
	if string(keyOf(a)) != "shared-snapshot-secret-one" {
		t.Fatal("the replaced snapshot was zeroed while a reader held it")
	}
	releaseA()
	if !bytes.Equal(keyOf(a), make([]byte, len(keyOf(a)))) {
		t.Fatal("the replaced snapshot was not zeroed when its last reader let go")
	}

	// A revocation: a new clone with the key marked revoked.
	if inForce, err := d.revs.store.Add(revocation.Revocation{Chain: "core", Key: "k1"}); !inForce || err != nil {
		t.Fatal(inForce, err)
	}
	e, releaseE := d.co.shared()
	if e == c || !e.Chains["core"].Keys[0].Revoked {
		t.Fatalf("after a revocation: same snapshot %t, revoked %t", e == c, e.Chains["core"].Keys[0].Revoked)
	}
	releaseC()
	releaseE()
	d.co.dropShared()
	if !bytes.Equal(keyOf(e), make([]byte, len(keyOf(e)))) {
		t.Fatal("dropShared left the last snapshot's key bytes")
	}
}

// memRevocations is a revocation record kept in memory only.
func memRevocations(t *testing.T) *revocation.Store {
	s, err := revocation.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
