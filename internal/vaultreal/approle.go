package vaultreal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"
)

// AppRole enables the approle auth method on the Vault of c (a root
// client) unless it is on, writes policy name with the given text, and
// creates role name with it, whose tokens live ttl, renewable up to maxTTL
// (Vault durations, "10m"). It returns files holding the role's role_id
// and a new secret_id (CredFiles), and removes the role and the policy
// when t ends. The credentials are written only to those files.
func AppRole(t testing.TB, c *api.Client, name, policy, ttl, maxTTL string) (roleFile, secretFile string) {
	t.Helper()
	err := c.Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"})
	if err != nil && !strings.Contains(err.Error(), "path is already in use") {
		t.Fatalf("enable approle: %v", err)
	}
	if err := c.Sys().PutPolicy(name, policy); err != nil {
		t.Fatalf("policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Sys().DeletePolicy(name) })
	if _, err := c.Logical().Write("auth/approle/role/"+name, map[string]any{
		"token_policies": name, "token_ttl": ttl, "token_max_ttl": maxTTL}); err != nil {
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
	return CredFiles(t, fmt.Sprint(r.Data["role_id"]), fmt.Sprint(s.Data["secret_id"]))
}

// CredFiles writes an AppRole's role_id and secret_id to files of their
// own (mode 0600) in a temporary directory of t, as aokeyd's
// key_source.vault.auth role_id_file and secret_id_file name them.
func CredFiles(t testing.TB, roleID, secretID string) (roleFile, secretFile string) {
	t.Helper()
	dir := t.TempDir()
	roleFile, secretFile = filepath.Join(dir, "role_id"), filepath.Join(dir, "secret_id")
	for p, v := range map[string]string{roleFile: roleID, secretFile: secretID} {
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return roleFile, secretFile
}
