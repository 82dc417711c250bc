package keystore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
)

// TestVaultContract runs the shared Vault suite (runVaultSuite: what aokeyd
// relies on from Vault's HTTP API) against each kind of server: the
// project's fake (package vaulttest), a real Vault dev server and a real
// Vault with its data on disk (raft), both started from $AOKEYD_VAULT (see
// internal/vaultreal; they skip without it, or fail with
// AOKEYD_REQUIRE_VAULT=1), and any Vault or OpenBao at VAULT_ADDR with
// VAULT_TOKEN (skipped without them). Where the fake and real Vault differ,
// real Vault is right and the fake is corrected. Each case writes under a
// fresh prefix of its server and deletes what it wrote.
func TestVaultContract(t *testing.T) {
	kinds := []struct {
		name string
		// server returns the envs of one server, started once for all
		// of the suite's cases.
		server func(t *testing.T) func(t *testing.T) *vaultEnv
	}{
		{"vaulttest", func(*testing.T) func(*testing.T) *vaultEnv { return newFakeEnv }},
		{"vault-dev", func(t *testing.T) func(*testing.T) *vaultEnv {
			s := vaultreal.StartDev(t)
			return realEnvs(s.Addr, s.RootToken, "secret")
		}},
		{"vault-file", func(t *testing.T) func(*testing.T) *vaultEnv {
			s := vaultreal.StartStored(t)
			return realEnvs(s.Addr, s.RootToken, "secret")
		}},
		{"external", func(t *testing.T) func(*testing.T) *vaultEnv {
			addr, tok := os.Getenv("VAULT_ADDR"), os.Getenv("VAULT_TOKEN")
			if addr == "" || tok == "" {
				t.Skip("a Vault of your own: set VAULT_ADDR and VAULT_TOKEN (e.g. `vault server -dev`) to run it")
			}
			mount := os.Getenv("AOKEYD_VAULT_KV_MOUNT")
			if mount == "" {
				mount = "secret"
			}
			return realEnvs(addr, tok, mount)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { runVaultSuite(t, k.server(t)) })
	}
}

// realEnvs returns fresh envs on a real Vault at addr whose token tok may
// write the KV v2 mount, enable the approle auth method and write
// policies (a root token).
func realEnvs(addr, tok, mount string) func(t *testing.T) *vaultEnv {
	n := 0
	return func(t *testing.T) *vaultEnv {
		n++
		e := &vaultEnv{addr: addr, root: tok, mount: mount,
			prefix: fmt.Sprintf("aokeyd-contract-%d-%d", time.Now().UnixNano(), n)}
		admin, err := api.NewClient(e.config())
		if err != nil {
			t.Fatal(err)
		}
		admin.SetToken(tok)
		e.admin = admin
		t.Cleanup(func() {
			ctx := context.Background()
			sec, _ := admin.Logical().ListWithContext(ctx, mount+"/metadata/"+e.prefix+"/chains")
			if sec != nil {
				keys, _ := sec.Data["keys"].([]any)
				for _, k := range keys {
					_ = admin.KVv2(mount).DeleteMetadata(ctx, e.prefix+"/chains/"+fmt.Sprint(k))
				}
			}
		})
		e.appRole = func(t *testing.T) (string, string) {
			return realAppRole(t, admin, e, "10m", "30m")
		}
		e.namedToken = func(t *testing.T, name string) string {
			s, err := admin.Auth().Token().Create(&api.TokenCreateRequest{DisplayName: name, TTL: "1h"})
			if err != nil || s == nil || s.Auth == nil {
				t.Fatalf("token create: %v", err)
			}
			t.Cleanup(func() { _ = admin.Auth().Token().RevokeOrphan(s.Auth.ClientToken) })
			return s.Auth.ClientToken
		}
		return e
	}
}

// realAppRole creates a policy that may read and write e's prefix and an
// AppRole with it whose tokens live ttl, renewable up to maxTTL, and
// returns its role_id and secret_id files.
func realAppRole(t *testing.T, c *api.Client, e *vaultEnv, ttl, maxTTL string) (string, string) {
	t.Helper()
	policy := fmt.Sprintf(`path "%[1]s/data/%[2]s/*" { capabilities = ["create", "read", "update"] }
path "%[1]s/metadata/%[2]s/*" { capabilities = ["read", "list"] }
`, e.mount, e.prefix)
	return vaultreal.AppRole(t, c, e.prefix, policy, ttl, maxTTL)
}
