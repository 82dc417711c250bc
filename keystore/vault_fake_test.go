package keystore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// seeded returns a fake env with chain core written, and a Cache over a
// source with the given auth that has read it once.
func seeded(t *testing.T, auth func(e *vaultEnv) VaultAuth) (*vaultEnv, *VaultSource, *Cache) {
	t.Helper()
	return seededIn(t, newFakeEnv(t), auth)
}

// seededIn is seeded against the Vault of env e (the test server's or a
// real one's).
func seededIn(t *testing.T, e *vaultEnv, auth func(e *vaultEnv) VaultAuth) (*vaultEnv, *VaultSource, *Cache) {
	t.Helper()
	sec := loadSecrets(t)
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
	v := e.source(t, auth(e))
	c := NewCache(v, CacheOptions{Logger: logger(t)})
	t.Cleanup(c.Close)
	if ch, err := c.Refresh(context.Background()); err != nil || !ch {
		t.Fatalf("first refresh: %t %v", ch, err)
	}
	return e, v, c
}

func rootAuth(e *vaultEnv) VaultAuth { return VaultAuth{Token: e.root} }

// keepsSnapshot checks that the Cache still serves the first snapshot after
// a failed refresh, with the failure in its status.
func keepsSnapshot(t *testing.T, c *Cache, wantErr string) {
	t.Helper()
	sec := loadSecrets(t)
	_, err := c.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("refresh error %v, want one containing %q", err, wantErr)
	}
	noSecret(t, err.Error())
	st := c.Status()
	if !st.HaveSnapshot || st.LastError == nil || st.ConsecutiveFailures == 0 {
		t.Fatalf("status %+v", st)
	}
	s := c.Current()
	defer s.Zero()
	if k, ok := s.Chains["core"].Key("k1"); !ok || !secretIs(k, sec[0]) {
		t.Fatal("last good snapshot lost")
	}
}

func TestVaultSealedKeepsLastGood(t *testing.T) { synctest.Test(t, testVaultSealedKeepsLastGood) }

func testVaultSealedKeepsLastGood(t *testing.T) {
	e, _, c := seeded(t, rootAuth)
	e.fake.Seal()
	time.Sleep(5 * time.Minute) // the bubble's clock
	keepsSnapshot(t, c, "is sealed: read ")
	if age := c.Status().Age; age != 5*time.Minute {
		t.Errorf("age %v, want 5m", age)
	}
	e.fake.Unseal()
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.LastError != nil || st.Age != 0 {
		t.Errorf("after unseal: %+v", st)
	}
}

func TestVaultStoppedMidRunKeepsLastGood(t *testing.T) {
	e, _, c := seeded(t, rootAuth)
	e.fake.Stop()
	keepsSnapshot(t, c, "connection refused")
	if err := e.fake.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

func TestVaultDeniedPathKeepsLastGood(t *testing.T) {
	e, _, c := seeded(t, rootAuth)
	// A new version the source may not read: the old one stays in force.
	sec := loadSecrets(t)
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k2", 3, 4, sec[1])), 1)
	e.fake.Deny("secret/data/aokeyd/chains/core")
	keepsSnapshot(t, c, "permission denied")
}

// A Vault whose storage errs (500) on the source's path, and a Deny
// lifted with Undeny: the last good snapshot holds, then the new version
// is read.
func TestVaultServerErrorKeepsLastGood(t *testing.T) {
	e, _, c := seeded(t, rootAuth)
	sec := loadSecrets(t)
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0]), key("k2", 3, 4, sec[1])), 1)
	e.fake.Fail("secret/", 500)
	e.fake.Deny("secret/data/aokeyd/chains/core")
	keepsSnapshot(t, c, "internal error")
	e.fake.Fail("secret/", 0)
	keepsSnapshot(t, c, "permission denied")
	e.fake.Undeny("secret/data/aokeyd/chains/core")
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("refresh after Undeny and Fail(0): %v", err)
	}
	s := c.Current()
	defer s.Zero()
	if _, ok := s.Chains["core"].Key("k2"); !ok {
		t.Fatal("the new version was not read once Vault answered again")
	}
}

func TestVaultStaticTokenExpiryKeepsLastGood(t *testing.T) {
	synctest.Test(t, testVaultStaticTokenExpiryKeepsLastGood)
}

func testVaultStaticTokenExpiryKeepsLastGood(t *testing.T) {
	_, _, c := seeded(t, func(e *vaultEnv) VaultAuth {
		return VaultAuth{Token: e.fake.IssueToken(vaulttest.TokenOptions{TTL: time.Hour, Renewable: true})}
	})
	time.Sleep(2 * time.Hour) // the bubble's clock: past the token's 1h TTL
	keepsSnapshot(t, c, "permission denied")
}

func TestVaultAppRoleReloginAfterExpiry(t *testing.T) {
	synctest.Test(t, testVaultAppRoleReloginAfterExpiry)
}

func testVaultAppRoleReloginAfterExpiry(t *testing.T) {
	e := newFakeEnv(t)
	rf, sf := e.appRole(t)
	sec := loadSecrets(t)
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
	v := e.source(t, VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf})
	mustRead(t, v)
	first := v.Client().Token()
	time.Sleep(2 * time.Hour) // the bubble's clock: past the 1h TTL
	mustRead(t, v)
	if n := e.fake.Count("PUT", "auth/approle/login") + e.fake.Count("POST", "auth/approle/login"); n != 2 {
		t.Errorf("%d logins, want 2", n)
	}
	if v.Client().Token() == first {
		t.Error("token not replaced after expiry")
	}
	// Wrong credentials: the read fails (and a Cache would keep its snapshot).
	if err := os.WriteFile(sf, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fake.ExpireAllTokens()
	_, err := v.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "invalid role or secret ID") {
		t.Fatalf("read with a bad secret_id: %v", err)
	}
}

func TestVaultTokenFileReread(t *testing.T) {
	e := newFakeEnv(t)
	sec := loadSecrets(t)
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
	p := filepath.Join(t.TempDir(), "agent-token")
	t1 := e.fake.IssueToken(vaulttest.TokenOptions{TTL: time.Hour})
	if err := os.WriteFile(p, []byte(t1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := e.source(t, VaultAuth{TokenFile: p})
	mustRead(t, v)
	// Vault Agent writes a new token; the old one dies.
	t2 := e.fake.IssueToken(vaulttest.TokenOptions{TTL: time.Hour})
	if err := os.WriteFile(p, []byte(t2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fake.ExpireToken(t1)
	mustRead(t, v)
	if v.Client().Token() != t2 {
		t.Error("token file not re-read")
	}
}

func TestVaultNamespace(t *testing.T) {
	e := newFakeEnv(t)
	sec := loadSecrets(t)
	inNS := func(o *VaultOptions) { o.Namespace = "routers/eu" }
	w := e.source(t, VaultAuth{Token: e.root}, inNS)
	mustWrite(t, w, "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
	if s := mustRead(t, e.source(t, VaultAuth{Token: e.root}, inNS)); len(s.Chains) != 1 {
		t.Fatalf("chains %v", s.ChainNames())
	}
	_, err := e.rootSource(t).Read(context.Background())
	if !errors.Is(err, ErrNoChains) {
		t.Fatalf("root namespace read: %v, want ErrNoChains", err)
	}
	for _, r := range e.fake.Requests() {
		if strings.HasPrefix(r.Path, "secret/") && r.Namespace != "routers/eu" && r.Namespace != "" {
			t.Errorf("request %+v in an unexpected namespace", r)
		}
	}
}

// TestVaultRenewalAndRelogin runs the LifetimeWatcher against the fake on
// the bubble's clock: the token is renewed, and when the fake kills it the
// source logs in again.
func TestVaultRenewalAndRelogin(t *testing.T) { synctest.Test(t, testVaultRenewalAndRelogin) }

func testVaultRenewalAndRelogin(t *testing.T) {
	e := newFakeEnv(t)
	srv := e.fake
	srv.AddAppRole("aokeyd", "rid", "sid", vaulttest.TokenOptions{TTL: 4 * time.Second, MaxTTL: time.Hour, Renewable: true})
	rf, sf := credFiles(t, "rid", "sid")
	v := e.source(t, VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, 20*time.Second, "a renewal", func() bool { return srv.Count("PUT", "auth/token/renew-self") >= 1 })
	logins := srv.Count("PUT", "auth/approle/login")
	srv.ExpireAllTokens()
	waitFor(t, 30*time.Second, "a new login after the token died", func() bool {
		return srv.Count("PUT", "auth/approle/login") > logins
	})
}

// waitFor, in a synctest bubble, lets the source's goroutines run until ok
// holds (testkit.Until); it fails the test if ok does not hold within limit
// of the bubble's clock.
func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	if !testkit.Until(limit, ok) {
		t.Fatalf("no %s within %v", what, limit)
	}
}

func TestVaultTLSFromEnvironment(t *testing.T) {
	srv, err := vaulttest.New(vaulttest.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_ADDR", srv.URL())
	t.Setenv("VAULT_CACERT", ca)
	t.Setenv("VAULT_TOKEN", srv.RootToken())
	t.Setenv("VAULT_MAX_RETRIES", "0")
	v, err := NewVault(VaultOptions{Logger: logger(t)}) // everything from VAULT_*
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	sec := loadSecrets(t)
	mustWrite(t, v, "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
	mustRead(t, v)

	t.Setenv("VAULT_CACERT", "")
	w, err := NewVault(VaultOptions{Config: func() *api.Config { c := api.DefaultConfig(); c.MaxRetries = 0; return c }()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("read without the CA: %v", err)
	}
}
