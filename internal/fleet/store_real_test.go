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
	"github.com/aokeyd/aokeyd/internal/vaultreal/faultproxy"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// storeEnv is the Vault one of the store's cases runs against: the test
// Vault or a real one, with what the case may do to it.
type storeEnv struct {
	root   *api.Client // the root token's client
	prefix string      // the case's own fleet prefix under secret/
	addr   string      // the Vault's address, as an UnavailableError names it
	// config is a client configuration for the Vault, without a token.
	config func() *api.Config
	// seal and unseal, stop and start (the same address and data after):
	// Vault's outages and their ends.
	seal, unseal, stop, start func(t *testing.T)
	// appRole returns the role_id and secret_id files of a role that may
	// read and write under prefix.
	appRole func(t *testing.T) (roleFile, secretFile string)
	// kill ends a token at once, as its TTL running out does.
	kill func(t *testing.T, token string)
	// slowClient is a root client whose requests under secret/ take as
	// long as slow was last told (0: no delay), and its Vault address.
	slowClient func(t *testing.T) (c *api.Client, addr string, slow func(time.Duration))
	// count adds n to a counter of the vault-real proof line; a no-op
	// against the test Vault, whose passes prove nothing of Vault.
	count func(t *testing.T, name string, n int)
}

// storeCases run against the test Vault and a real one, each on an env
// of its own. file: against real Vault, the case needs a server that can
// be sealed and restarted with its data (vaultreal.StartStored).
var storeCases = []struct {
	name string
	file bool
	f    func(t *testing.T, e *storeEnv)
}{
	{"AddRevocationCheckAndSet", false, testAddRevocationCheckAndSet},
	{"StatusesSkipsABadDocument", false, testStatusesSkipsABadDocument},
	{"RoutersRaceARevoke", false, testRoutersRaceARevoke},
	{"RevocationRecordGone", false, testRevocationRecordGone},
	{"Sealed", true, testVaultDown(true)},
	{"StoppedStarted", true, testVaultDown(false)},
	{"AppRoleSource", true, testAppRoleSource},
	{"Slow", false, testVaultSlow},
}

// TestStoreFakeVault runs the store's cases against the test Vault
// (keystore/vaulttest), in a synctest bubble.
func TestStoreFakeVault(t *testing.T) {
	for _, tc := range storeCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, c := newVault(t)
				tc.f(t, &storeEnv{root: c, prefix: "aokeyd/fleet", addr: srv.URL(), config: srv.ClientConfig,
					seal:   func(*testing.T) { srv.Seal() },
					unseal: func(*testing.T) { srv.Unseal() },
					stop:   func(*testing.T) { srv.Stop() },
					start: func(t *testing.T) {
						if err := srv.Start(); err != nil {
							t.Fatal(err)
						}
					},
					appRole: func(t *testing.T) (string, string) {
						srv.AddAppRole("fleet", "role-id-fleet", "secret-id-fleet", vaulttest.TokenOptions{TTL: time.Hour, Renewable: true})
						return vaultreal.CredFiles(t, "role-id-fleet", "secret-id-fleet")
					},
					kill:  func(_ *testing.T, tok string) { srv.ExpireToken(tok) },
					count: func(*testing.T, string, int) {},
					slowClient: func(*testing.T) (*api.Client, string, func(time.Duration)) {
						return c, srv.URL(), func(d time.Duration) { srv.Delay("secret/", d) }
					},
				})
			})
		})
	}
}

// TestStoreRealVault runs the store's cases against real Vault
// (internal/vaultreal): a dev server, and a server with raft storage for
// the cases that seal it or stop and start it. Documents, the revocation
// record and its check-and-set as Vault itself enforces them.
func TestStoreRealVault(t *testing.T) {
	dev := vaultreal.StartDev(t)
	file := vaultreal.StartStored(t)
	for _, tc := range storeCases {
		srv := dev
		if tc.file {
			srv = file
		}
		t.Run(tc.name, func(t *testing.T) {
			prefix := "aokeyd-real/" + tc.name
			root := srv.Client()
			tc.f(t, &storeEnv{root: root, prefix: prefix, addr: srv.Addr, config: srv.Config,
				seal:   func(*testing.T) { srv.Seal() },
				unseal: func(*testing.T) { srv.Unseal() },
				stop:   func(*testing.T) { srv.Stop() },
				start:  func(*testing.T) { srv.Restart() },
				appRole: func(t *testing.T) (string, string) {
					policy := fmt.Sprintf("path %q { capabilities = [\"create\", \"read\", \"update\"] }\npath %q { capabilities = [\"read\", \"list\"] }\n",
						"secret/data/"+prefix+"/*", "secret/metadata/"+prefix+"/*")
					return vaultreal.AppRole(t, root, "fleet-"+tc.name, policy, "10m", "30m")
				},
				kill: func(t *testing.T, tok string) {
					if err := root.Auth().Token().RevokeOrphan(tok); err != nil {
						t.Fatalf("revoke the token: %v", err)
					}
				},
				count: func(t *testing.T, name string, n int) { vaultreal.Count(t, name, n) },
				// Real Vault cannot be made slow: the fault proxy in
				// front of it is.
				slowClient: func(t *testing.T) (*api.Client, string, func(time.Duration)) {
					px := faultproxy.Start(t, srv.Addr)
					cfg := srv.Config()
					cfg.Address = px.URL()
					c, err := api.NewClient(cfg)
					if err != nil {
						t.Fatal(err)
					}
					c.SetToken(srv.RootToken)
					return c, px.URL(), func(d time.Duration) { px.Slow("secret/", d) }
				},
			})
		})
	}
}

// testRoutersRaceARevoke: two routers, each with its own client, revoke at
// once: the same key (exactly one records it, the other is told it is
// already revoked, with the first's entry) and then keys of their own;
// every revocation is in the record once, and each successful write made
// one version.
func testRoutersRaceARevoke(t *testing.T, e *storeEnv) {
	root, prefix := e.root, e.prefix
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
