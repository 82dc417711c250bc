package keystore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// vaultEnv is one Vault to test against: the project's fake or, in the
// contract test, a real server.
type vaultEnv struct {
	addr, root, mount, prefix string
	fake                      *vaulttest.Server // nil for a real Vault
	admin                     *api.Client       // a real Vault's root client; nil for the fake
	// appRole returns role_id and secret_id files for a role that can read
	// and write the prefix.
	appRole func(t *testing.T) (roleFile, secretFile string)
	// namedToken issues a token with a display name (vault token create
	// -display-name), for the fleet's "who".
	namedToken func(t *testing.T, name string) string
}

// newFakeEnv is the fake Vault, in memory: in a synctest bubble the server
// and the sources' clients run on the bubble's clock (token TTLs too).
func newFakeEnv(t *testing.T) *vaultEnv {
	t.Helper()
	srv, err := vaulttest.New(vaulttest.Options{RootToken: "hvs.fake-root-token", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e := &vaultEnv{addr: srv.URL(), root: srv.RootToken(), mount: "secret", prefix: "aokeyd", fake: srv}
	e.appRole = func(t *testing.T) (string, string) {
		srv.AddAppRole("aokeyd", "role-id-router-a", "secret-id-router-a",
			vaulttest.TokenOptions{TTL: time.Hour, MaxTTL: 4 * time.Hour, Renewable: true, Policies: []string{"aokeyd"}})
		return credFiles(t, "role-id-router-a", "secret-id-router-a")
	}
	e.namedToken = func(t *testing.T, name string) string {
		return srv.IssueToken(vaulttest.TokenOptions{DisplayName: name, TTL: time.Hour})
	}
	return e
}

func credFiles(t *testing.T, roleID, secretID string) (string, string) {
	return vaultreal.CredFiles(t, roleID, secretID)
}

func (e *vaultEnv) config() *api.Config {
	cfg := api.DefaultConfig()
	cfg.Address = e.addr
	cfg.MaxRetries = 0
	cfg.Timeout = 10 * time.Second
	if e.fake != nil {
		cfg.HttpClient.Transport.(*http.Transport).DialContext = e.fake.DialContext
	}
	return cfg
}

func (e *vaultEnv) source(t *testing.T, auth VaultAuth, mut ...func(*VaultOptions)) *VaultSource {
	t.Helper()
	o := VaultOptions{Config: e.config(), Mount: e.mount, Prefix: e.prefix, Auth: auth, Logger: logger(t),
		RetryInterval: 50 * time.Millisecond}
	for _, m := range mut {
		m(&o)
	}
	v, err := NewVault(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func (e *vaultEnv) rootSource(t *testing.T) *VaultSource {
	return e.source(t, VaultAuth{Token: e.root})
}

func mustWrite(t *testing.T, v *VaultSource, chain string, doc []byte, cas int) int {
	t.Helper()
	ver, err := v.WriteChain(context.Background(), chain, doc, cas)
	if err != nil {
		noSecret(t, err.Error())
		t.Fatalf("WriteChain %s: %v", chain, err)
	}
	return ver
}

func mustRead(t *testing.T, v *VaultSource) *Snapshot {
	t.Helper()
	s, err := v.Read(context.Background())
	if err != nil {
		noSecret(t, err.Error())
		t.Fatalf("Read: %v", err)
	}
	t.Cleanup(s.Zero)
	return s
}

func secretIs(m MKT, raw string) bool { return m.Secret.Equal(tcpao.NewSecret([]byte(raw))) }

// runVaultSuite is the part of the Vault tests that must pass against both
// the fake and a real Vault.
func runVaultSuite(t *testing.T, newEnv func(t *testing.T) *vaultEnv) {
	sec := loadSecrets(t)
	ctx := context.Background()
	core := func(t *testing.T) []byte {
		return chainJSON(t, []string{"192.0.2.2", "2001:db8::2"},
			key("2026-10", 1, 101, sec[0]),
			key("2026-11", 2, 102, sec[1]).with("send_lifetime", map[string]any{"start": "2026-11-01T00:00:00Z", "duration": "30d"}))
	}
	edge := func(t *testing.T, s string) []byte {
		return chainJSON(t, []string{"203.0.113.0/24"}, key("e1", 5, 6, s).with("algorithm", "sha1", "tcp_options", "exclude"))
	}

	t.Run("WriteAndRead", func(t *testing.T) {
		e := newEnv(t)
		v := e.rootSource(t)
		if ver := mustWrite(t, v, "core", core(t), 0); ver != 1 {
			t.Fatalf("first version %d", ver)
		}
		mustWrite(t, v, "edge", edge(t, sec[2]), 0)
		s := mustRead(t, v)
		if len(s.Chains) != 2 || len(s.Rejected()) != 0 {
			t.Fatalf("chains %v rejected %v", s.ChainNames(), s.Rejected())
		}
		a, _ := s.Chains["core"].Key("2026-10")
		b, _ := s.Chains["core"].Key("2026-11")
		x, _ := s.Chains["edge"].Key("e1")
		if !secretIs(a, sec[0]) || !secretIs(b, sec[1]) || !secretIs(x, sec[2]) {
			t.Error("secrets differ from what was written")
		}
		if a.SendID != 1 || a.RecvID != 101 || len(a.Peers) != 2 || x.IncludeTCPOptions || x.Algorithm != tcpao.HMACSHA1 {
			t.Errorf("fields: %v %v", a, x)
		}
		if b.SendLifetime.End.Sub(b.SendLifetime.Start) != 30*24*time.Hour {
			t.Errorf("lifetime %v", b.SendLifetime)
		}
		if s.Chains["core"].Version != 1 || !strings.HasPrefix(a.Source, "vault:"+e.mount+"/"+e.prefix+"/chains/core@v1#") {
			t.Errorf("version %d source %q", s.Chains["core"].Version, a.Source)
		}
		noSecret(t, fmt.Sprintf("%v %+v", s, a))
	})

	t.Run("NewVersionOnlyRereadsThatChain", func(t *testing.T) {
		e := newEnv(t)
		v := e.rootSource(t)
		mustWrite(t, v, "core", core(t), 0)
		mustWrite(t, v, "edge", edge(t, sec[2]), 0)
		c := NewCache(v, CacheOptions{Logger: logger(t)})
		defer c.Close()
		if ch, err := c.Refresh(ctx); err != nil || !ch {
			t.Fatalf("first refresh: %t %v", ch, err)
		}
		dataReads := func() int {
			if e.fake == nil {
				return -1
			}
			return e.fake.Count("GET", e.mount+"/data/")
		}
		before := dataReads()
		if ch, err := c.Refresh(ctx); err != nil || ch {
			t.Fatalf("unchanged refresh: changed=%t %v", ch, err)
		}
		if e.fake != nil && dataReads() != before {
			t.Errorf("unchanged chains were re-read: %d data reads", dataReads()-before)
		}
		mustWrite(t, v, "edge", edge(t, sec[3]), 1)
		before = dataReads()
		if ch, err := c.Refresh(ctx); err != nil || !ch {
			t.Fatalf("refresh after new version: %t %v", ch, err)
		}
		if e.fake != nil && dataReads()-before != 1 {
			t.Errorf("want exactly the changed chain re-read, got %d data reads", dataReads()-before)
		}
		st := c.Status()
		if st.Versions["core"] != 1 || st.Versions["edge"] != 2 {
			t.Errorf("versions %v", st.Versions)
		}
		s := c.Current()
		defer s.Zero()
		if x, _ := s.Chains["edge"].Key("e1"); !secretIs(x, sec[3]) {
			t.Error("new version's secret not read")
		}
		if a, _ := s.Chains["core"].Key("2026-10"); !secretIs(a, sec[0]) {
			t.Error("cached chain lost its secret")
		}
	})

	t.Run("RevokeIsSeenByOtherRouters", func(t *testing.T) {
		e := newEnv(t)
		a := e.rootSource(t)
		b := e.rootSource(t)
		mustWrite(t, a, "core", core(t), 0)
		mustRead(t, b)
		if err := a.Revoke(ctx, "core", "2026-10"); err != nil {
			t.Fatal(err)
		}
		if err := a.Revoke(ctx, "core", "2026-10"); err != nil {
			t.Fatalf("second revoke: %v", err)
		}
		if err := a.Revoke(ctx, "core", "no-such-key"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoke unknown key: %v", err)
		}
		s := mustRead(t, b)
		k, _ := s.Chains["core"].Key("2026-10")
		other, _ := s.Chains["core"].Key("2026-11")
		if !k.Revoked || other.Revoked || s.Chains["core"].Version != 2 {
			t.Fatalf("revoked=%t other=%t version=%d", k.Revoked, other.Revoked, s.Chains["core"].Version)
		}
		if !secretIs(other, sec[1]) {
			t.Error("revoke damaged the other key")
		}
	})

	t.Run("CheckAndSet", func(t *testing.T) {
		e := newEnv(t)
		v := e.rootSource(t)
		mustWrite(t, v, "core", core(t), 0)
		_, err := v.WriteChain(ctx, "core", core(t), 0)
		if !isCASMismatch(err) {
			t.Fatalf("second create with cas=0: %v", err)
		}
		if ver := mustWrite(t, v, "core", core(t), 1); ver != 2 {
			t.Fatalf("cas=1 wrote version %d", ver)
		}
	})

	// vault kv delete (soft, of the latest version), undelete and
	// destroy: the version keeps its number, current_version does not go
	// back, and a read of the chain fails (404) while its current version
	// has no data; a destroyed version never comes back.
	t.Run("SoftDeleteUndeleteDestroy", func(t *testing.T) {
		e := newEnv(t)
		v := e.rootSource(t)
		kv := v.Client().KVv2(e.mount)
		p := e.prefix + "/chains/core"
		mustWrite(t, v, "core", core(t), 0)
		mustWrite(t, v, "core", core(t), 1)
		// The source says which version is gone, and how, without
		// reading it.
		readFails := func(ver int, how string) {
			t.Helper()
			_, err := v.Read(ctx)
			want := fmt.Sprintf("chains/core: its current version %d is %s", ver, how)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("read: %v, want %q", err, want)
			}
			noSecret(t, err.Error())
			// What Vault answers for the version's data: 404.
			_, err = v.Client().Logical().ReadRawWithDataWithContext(ctx, e.mount+"/data/"+p,
				map[string][]string{"version": {fmt.Sprint(ver)}})
			var re *api.ResponseError
			if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
				t.Errorf("data read of a %s version: %v, want Vault's 404", how, err)
			}
		}
		meta := func(ver int) (current int, deleted bool, destroyed bool) {
			t.Helper()
			md, err := kv.GetMetadata(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			x := md.Versions[fmt.Sprint(ver)]
			return md.CurrentVersion, !x.DeletionTime.IsZero(), x.Destroyed
		}
		if err := kv.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		if cur, del, des := meta(2); cur != 2 || !del || des {
			t.Fatalf("after delete: current %d deleted %t destroyed %t", cur, del, des)
		}
		readFails(2, "deleted")
		if err := kv.Undelete(ctx, p, []int{2}); err != nil {
			t.Fatal(err)
		}
		if s := mustRead(t, v); s.Chains["core"].Version != 2 {
			t.Fatalf("after undelete: version %d", s.Chains["core"].Version)
		}
		if err := kv.Destroy(ctx, p, []int{2}); err != nil {
			t.Fatal(err)
		}
		if err := kv.Undelete(ctx, p, []int{2}); err != nil {
			t.Fatal(err)
		}
		if cur, del, des := meta(2); cur != 2 || del || !des {
			t.Fatalf("after destroy and undelete: current %d deleted %t destroyed %t", cur, del, des)
		}
		readFails(2, "destroyed")
		if ver := mustWrite(t, v, "core", core(t), 2); ver != 3 {
			t.Fatalf("write after destroy: version %d", ver)
		}
		if s := mustRead(t, v); s.Chains["core"].Version != 3 {
			t.Fatalf("after a new version: %d", s.Chains["core"].Version)
		}
	})

	t.Run("BadKeyRejectedOthersLoad", func(t *testing.T) {
		e := newEnv(t)
		v := e.rootSource(t)
		doc := chainJSON(t, []string{"192.0.2.2"}, key("ok", 1, 2, sec[0]),
			key("long", 3, 4, "").with("secret_b64", nil, "secret_hex", hexs(strings.Repeat(sec[1], 3))),
			key("badpeer", 5, 6, sec[2]).with("peers", []string{"192.0.2.1/24"}))
		if _, err := v.WriteChain(ctx, "core", doc, 0); err == nil {
			t.Fatal("WriteChain accepted a chain with bad keys")
		} else {
			noSecret(t, err.Error())
		}
		// Written behind aokeyd's back (e.g. with the vault CLI):
		if _, err := v.Client().KVv2(e.mount).Put(ctx, e.prefix+"/chains/core", mapOf(t, doc)); err != nil {
			t.Fatal(err)
		}
		s := mustRead(t, v)
		c := s.Chains["core"]
		if len(c.Keys) != 1 || c.Keys[0].Name != "ok" || len(c.Rejected) != 2 {
			t.Fatalf("keys %v rejected %v", c.Keys, c.Rejected)
		}
		want := []string{`vault:` + e.mount + `/` + e.prefix + `/chains/core@v1: keys[1].secret_hex: chain "core" key "long": want 1..80 bytes`,
			`keys[2].peers[0]: chain "core" key "badpeer": prefix has host bits set`}
		for i, r := range c.Rejected {
			noSecret(t, r.Error())
			if !strings.Contains(r.Error(), want[i]) {
				t.Errorf("rejection %q lacks %q", r, want[i])
			}
		}
	})

	t.Run("AppRoleLogin", func(t *testing.T) {
		e := newEnv(t)
		mustWrite(t, e.rootSource(t), "core", core(t), 0)
		rf, sf := e.appRole(t)
		v := e.source(t, VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf})
		s := mustRead(t, v)
		if len(s.Chains["core"].Keys) != 2 {
			t.Fatalf("keys %v", s.Chains["core"].Keys)
		}
		if v.Client().Token() == e.root || v.Client().Token() == "" {
			t.Fatal("no AppRole token in use")
		}
		if err := v.Revoke(ctx, "core", "2026-11"); err != nil {
			t.Fatalf("revoke with the AppRole token: %v", err)
		}
	})

	t.Run("BadTokenIs403", func(t *testing.T) {
		e := newEnv(t)
		mustWrite(t, e.rootSource(t), "core", core(t), 0)
		v := e.source(t, VaultAuth{Token: "hvs.not-a-token"})
		_, err := v.Read(ctx)
		if !IsPermissionDenied(err) {
			t.Fatalf("Read with a bad token: %v", err)
		}
		noSecret(t, err.Error())
	})

	// The fleet records who revoked a key by the token's display name:
	// Vault prefixes a created token's with "token-".
	t.Run("TokenDisplayName", func(t *testing.T) {
		e := newEnv(t)
		v := e.source(t, VaultAuth{Token: e.namedToken(t, "alice")})
		var got any
		err := v.WithClient(ctx, func(c *api.Client) error {
			s, err := c.Auth().Token().LookupSelfWithContext(ctx)
			if err == nil && s != nil {
				got = s.Data["display_name"]
			}
			return err
		})
		if err != nil || got != "token-alice" {
			t.Errorf("lookup-self display_name %v (%v), want token-alice", got, err)
		}
	})
}

func mapOf(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	v, err := decodeJSONMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
