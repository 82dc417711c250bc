package keystore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
)

// TestVaultContract runs the shared Vault suite against a real Vault (or
// OpenBao) server, to prove package vaulttest faithful. It needs VAULT_ADDR
// and a token with rights to write the KV v2 mount (AOKEYD_VAULT_KV_MOUNT,
// default "secret"), enable the approle auth method and write policies,
// e.g. a dev server's root token. It writes under a fresh prefix and deletes
// what it wrote. See docs/keys.md.
func TestVaultContract(t *testing.T) {
	addr, tok := os.Getenv("VAULT_ADDR"), os.Getenv("VAULT_TOKEN")
	if addr == "" || tok == "" {
		t.Skip("contract test against a real Vault: set VAULT_ADDR and VAULT_TOKEN (e.g. `vault server -dev`) to run it")
	}
	mount := os.Getenv("AOKEYD_VAULT_KV_MOUNT")
	if mount == "" {
		mount = "secret"
	}
	n := 0
	runVaultSuite(t, func(t *testing.T) *vaultEnv {
		n++
		e := &vaultEnv{addr: addr, root: tok, mount: mount,
			prefix: fmt.Sprintf("aokeyd-contract-%d-%d", time.Now().UnixNano(), n)}
		admin, err := api.NewClient(e.config())
		if err != nil {
			t.Fatal(err)
		}
		admin.SetToken(tok)
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
			return realAppRole(t, admin, e)
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
	})
}

func realAppRole(t *testing.T, c *api.Client, e *vaultEnv) (string, string) {
	t.Helper()
	err := c.Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"})
	if err != nil && !strings.Contains(err.Error(), "path is already in use") {
		t.Fatalf("enable approle: %v", err)
	}
	name := e.prefix
	policy := fmt.Sprintf(`path "%[1]s/data/%[2]s/*" { capabilities = ["create", "read", "update"] }
path "%[1]s/metadata/%[2]s/*" { capabilities = ["read", "list"] }
`, e.mount, e.prefix)
	if err := c.Sys().PutPolicy(name, policy); err != nil {
		t.Fatalf("policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Sys().DeletePolicy(name) })
	if _, err := c.Logical().Write("auth/approle/role/"+name, map[string]any{
		"token_policies": name, "token_ttl": "10m", "token_max_ttl": "30m"}); err != nil {
		t.Fatalf("role: %v", err)
	}
	t.Cleanup(func() { _, _ = c.Logical().Delete("auth/approle/role/" + name) })
	r, err := c.Logical().Read("auth/approle/role/" + name + "/role-id")
	if err != nil || r == nil {
		t.Fatalf("role-id: %v", err)
	}
	s, err := c.Logical().Write("auth/approle/role/"+name+"/secret-id", nil)
	if err != nil || s == nil {
		t.Fatalf("secret-id: %v", err)
	}
	return credFiles(t, fmt.Sprint(r.Data["role_id"]), fmt.Sprint(s.Data["secret_id"]))
}
