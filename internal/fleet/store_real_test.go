package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
)

// storeCases run against the test Vault and a real one: each gets a root
// client and a fleet prefix of its own.
var storeCases = []struct {
	name string
	f    func(t *testing.T, c *api.Client, prefix string)
}{
	{"AddRevocationCheckAndSet", testAddRevocationCheckAndSet},
	{"StatusesSkipsABadDocument", testStatusesSkipsABadDocument},
	{"RoutersRaceARevoke", testRoutersRaceARevoke},
	{"RevocationRecordGone", testRevocationRecordGone},
}

// TestStoreFakeVault runs the store's cases against the test Vault
// (keystore/vaulttest), in a synctest bubble.
func TestStoreFakeVault(t *testing.T) {
	for _, tc := range storeCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, c := newVault(t)
				tc.f(t, c, "aokeyd/fleet")
			})
		})
	}
}

// TestStoreRealVault runs the store's cases against a real Vault dev server
// (internal/vaultreal): documents, the revocation record and its
// check-and-set as Vault itself enforces them.
func TestStoreRealVault(t *testing.T) {
	srv := vaultreal.StartDev(t)
	for _, tc := range storeCases {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, srv.Client(), "aokeyd-real/"+tc.name) })
	}
}

// testRoutersRaceARevoke: two routers, each with its own client, revoke at
// once: the same key (exactly one records it, the other is told it is
// already revoked, with the first's entry) and then keys of their own;
// every revocation is in the record once, and each successful write made
// one version.
func testRoutersRaceARevoke(t *testing.T, root *api.Client, prefix string) {
	ctx := context.Background()
	routers := []string{"r1", "r2"}
	stores := make([]Store, len(routers))
	for i := range routers {
		c, err := root.Clone()
		if err != nil {
			t.Fatal(err)
		}
		c.SetToken(root.Token())
		stores[i] = Store{V: Client{c}, Mount: "secret", Prefix: prefix}
	}
	const own = 5
	var mu sync.Mutex
	var firsts, already int
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			_, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "leaked", By: routers[i], Reason: "race", At: time.Now()})
			mu.Lock()
			switch {
			case err == nil:
				firsts++
			case errors.Is(err, ErrAlreadyRevoked):
				already++
			default:
				t.Errorf("router %s: %v", routers[i], err)
			}
			mu.Unlock()
			for k := range own {
				if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: fmt.Sprintf("%s-k%d", routers[i], k),
					By: routers[i], Reason: "race", At: time.Now()}); err != nil {
					t.Errorf("router %s key %d: %v", routers[i], k, err)
				}
			}
		})
	}
	wg.Wait()
	if firsts != 1 || already != 1 {
		t.Errorf("the same key revoked at once: %d recorded it, %d told already revoked; want 1 and 1", firsts, already)
	}
	l, ver, err := stores[0].Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range l.Revocations {
		seen[r.Ref()]++
	}
	want := 1 + len(routers)*own
	if len(l.Revocations) != want || len(seen) != want || ver != want {
		t.Errorf("record: %d entries, %d distinct, version %d; want %d of each", len(l.Revocations), len(seen), ver, want)
	}
}
