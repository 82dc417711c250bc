package keystore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
)

// The Vault source against a real Vault (internal/vaultreal, $AOKEYD_VAULT):
// the failures the fake imitates, produced by Vault itself. The
// expectations are those of the tests against the fake: a failed read
// never strands the router (the Cache keeps its last good snapshot), the
// status says what failed, and no secret (key bytes, tokens) is echoed.

// realSeeded writes chain core (key k1) on srv under a fresh prefix and
// returns the env, a Cache over a source with auth(e), refreshed once.
func realSeeded(t *testing.T, srv *vaultreal.Server, auth func(e *vaultEnv) VaultAuth) (*vaultEnv, *VaultSource, *Cache) {
	t.Helper()
	return seededIn(t, realEnvs(srv.Addr, srv.RootToken, "secret")(t), auth)
}

// noToken fails t if text holds one of the tokens.
func noToken(t *testing.T, text string, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		if tok != "" && strings.Contains(text, tok) {
			t.Errorf("a Vault token appears in %q", strings.ReplaceAll(text, tok, "[token]"))
		}
	}
}

// refreshes checks that the Cache reads again, and that k is then in chain
// core.
func refreshes(t *testing.T, c *Cache, k string) {
	t.Helper()
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if st := c.Status(); st.LastError != nil || st.ConsecutiveFailures != 0 {
		t.Errorf("status after a good read: %+v", st)
	}
	s := c.Current()
	defer s.Zero()
	if _, ok := s.Chains["core"].Key(k); !ok {
		t.Fatalf("key %s not in the snapshot", k)
	}
}

// TestVaultRealKeepsLastGood: each way a real Vault stops answering keeps
// the last good snapshot, with the failure in the status, and the source
// reads again once Vault answers.
func TestVaultRealKeepsLastGood(t *testing.T) {
	dev := vaultreal.StartDev(t)
	file := vaultreal.StartStored(t)
	sec := loadSecrets(t)
	ctx := context.Background()
	newVersion := func(t *testing.T, e *vaultEnv) {
		mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0]), key("k2", 3, 4, sec[1])), 1)
	}
	for _, tc := range []struct {
		name    string
		srv     *vaultreal.Server
		auth    func(t *testing.T, e *vaultEnv) VaultAuth
		fail    func(t *testing.T, e *vaultEnv) // makes the next read fail
		wantErr string
		mend    func(t *testing.T, e *vaultEnv) // makes reads work again
		counter string                          // recorded as 1 when the case passes
	}{{
		// vault operator seal on a stored server, then unseal with its key.
		name: "Sealed", srv: file, wantErr: "is sealed: read ", counter: "sealed_ok",
		fail: func(t *testing.T, e *vaultEnv) { newVersion(t, e); file.Seal() },
		mend: func(t *testing.T, e *vaultEnv) { file.Unseal() },
	}, {
		// The process ends; it comes back sealed on the same address
		// with its data (and the source's token), and is unsealed.
		name: "StoppedStarted", srv: file, wantErr: "connection refused",
		fail: func(t *testing.T, e *vaultEnv) { newVersion(t, e); file.Stop() },
		mend: func(t *testing.T, e *vaultEnv) { file.Restart() },
	}, {
		// A policy that denies the chain's path (403), lifted again.
		name: "PolicyDenies", srv: dev, wantErr: "permission denied",
		auth: func(t *testing.T, e *vaultEnv) VaultAuth { return VaultAuth{Token: policyToken(t, e)} },
		fail: func(t *testing.T, e *vaultEnv) {
			newVersion(t, e)
			putPolicy(t, e, fmt.Sprintf("path %q { capabilities = [\"deny\"] }\n", e.mount+"/data/"+e.prefix+"/chains/core"))
		},
		mend: func(t *testing.T, e *vaultEnv) { putPolicy(t, e, "") },
	}, {
		// The latest version soft-deleted (vault kv delete): metadata
		// still names it current, its data is gone. Undeleted, it reads.
		name: "SoftDeleted", srv: dev, wantErr: "current version 2 is deleted", counter: "soft_delete_ok",
		fail: func(t *testing.T, e *vaultEnv) {
			newVersion(t, e)
			if err := e.admin.KVv2(e.mount).Delete(ctx, e.prefix+"/chains/core"); err != nil {
				t.Fatal(err)
			}
		},
		mend: func(t *testing.T, e *vaultEnv) {
			if err := e.admin.KVv2(e.mount).Undelete(ctx, e.prefix+"/chains/core", []int{2}); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		// The latest version destroyed (vault kv destroy): it never
		// comes back; a new version is read.
		name: "Destroyed", srv: dev, wantErr: "current version 2 is destroyed",
		fail: func(t *testing.T, e *vaultEnv) {
			newVersion(t, e)
			if err := e.admin.KVv2(e.mount).Destroy(ctx, e.prefix+"/chains/core", []int{2}); err != nil {
				t.Fatal(err)
			}
		},
		mend: func(t *testing.T, e *vaultEnv) { newVersion3(t, e, sec) },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			auth := tc.auth
			if auth == nil {
				auth = func(_ *testing.T, e *vaultEnv) VaultAuth { return VaultAuth{Token: e.root} }
			}
			e, v, c := realSeeded(t, tc.srv, func(e *vaultEnv) VaultAuth { return auth(t, e) })
			tc.fail(t, e)
			keepsSnapshot(t, c, tc.wantErr)
			keepsSnapshot(t, c, tc.wantErr) // and again: nothing was half-read
			if st := c.Status(); st.ConsecutiveFailures != 2 || st.Versions["core"] != 1 {
				t.Errorf("status after two failed reads: %+v", st)
			}
			noToken(t, c.Status().LastError.Error(), e.root, v.Client().Token())
			tc.mend(t, e)
			refreshes(t, c, "k2")
			if tc.counter != "" && !t.Failed() {
				vaultreal.Count(t, tc.counter, 1)
			}
		})
	}
}

func newVersion3(t *testing.T, e *vaultEnv, sec testSecrets) {
	t.Helper()
	mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0]), key("k2", 3, 4, sec[2])), 2)
}

// policyToken creates policy e.prefix (read and list under e's prefix) and a
// token with it.
func policyToken(t *testing.T, e *vaultEnv) string {
	t.Helper()
	putPolicy(t, e, "")
	s, err := e.admin.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{e.prefix}, TTL: "1h"})
	if err != nil || s == nil || s.Auth == nil {
		t.Fatalf("token create: %v", err)
	}
	return s.Auth.ClientToken
}

// putPolicy (re)writes policy e.prefix: read and list under e's prefix,
// then extra. A policy change applies to the tokens that have it at once.
func putPolicy(t *testing.T, e *vaultEnv, extra string) {
	t.Helper()
	p := fmt.Sprintf(`path "%[1]s/data/%[2]s/*" { capabilities = ["read"] }
path "%[1]s/metadata/%[2]s/*" { capabilities = ["read", "list"] }
`, e.mount, e.prefix) + extra
	if err := e.admin.Sys().PutPolicy(e.prefix, p); err != nil {
		t.Fatalf("policy: %v", err)
	}
}

// countingHandler counts the records with each message, and passes them on.
type countingHandler struct {
	slog.Handler
	mu *sync.Mutex
	n  map[string]int
}

func newCounting(t *testing.T) (*slog.Logger, func(msg string) int) {
	h := countingHandler{Handler: logger(t).Handler(), mu: &sync.Mutex{}, n: map[string]int{}}
	return slog.New(h), func(msg string) int { h.mu.Lock(); defer h.mu.Unlock(); return h.n[msg] }
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(as), h.mu, h.n}
}

func (h countingHandler) WithGroup(g string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(g), h.mu, h.n}
}

// TestVaultRealTokenLifetimes: Run keeps a short-lived token alive with
// renewals, and an AppRole source logs in again when its token cannot be
// renewed any more or has expired; reads succeed long after the first
// token's TTL, which they could not without renewal or a new login.
func TestVaultRealTokenLifetimes(t *testing.T) {
	srv := vaultreal.StartDev(t)
	ctx := context.Background()
	run := func(t *testing.T, v *VaultSource) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- v.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Run("TokenRenewed", func(t *testing.T) {
		e, v, c := realSeeded(t, srv, func(e *vaultEnv) VaultAuth {
			putPolicy(t, e, "")
			s, err := e.admin.Auth().Token().Create(&api.TokenCreateRequest{TTL: "3s", ExplicitMaxTTL: "5m", Policies: []string{e.prefix}})
			if err != nil || s == nil || s.Auth == nil {
				t.Fatalf("token create: %v", err)
			}
			return VaultAuth{Token: s.Auth.ClientToken}
		})
		log, count := newCounting(t)
		v.log = log
		run(t, v)
		time.Sleep(7 * time.Second) // more than twice the token's TTL
		refreshes(t, c, "k1")
		n := count("vault token renewed")
		if n < 2 {
			t.Errorf("%d renewals in 7s of a 3s token", n)
		}
		look, err := e.admin.Auth().Token().Lookup(v.Client().Token())
		if err != nil || look == nil || look.Data["last_renewal_time"] == nil {
			t.Errorf("Vault has no renewal of the token: %v", err)
		}
		if !t.Failed() {
			vaultreal.Count(t, "renewals", n)
		}
	})
	t.Run("AppRoleReloginAtMaxTTL", func(t *testing.T) {
		tokens := map[string]bool{}
		e, v, c := realSeeded(t, srv, func(e *vaultEnv) VaultAuth {
			rf, sf := realAppRole(t, e.admin, e, "2s", "4s")
			return VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf}
		})
		log, count := newCounting(t)
		v.log = log
		tokens[v.Client().Token()] = true
		run(t, v)
		deadline := time.Now().Add(15 * time.Second)
		for len(tokens) < 3 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			v.mu.Lock()
			tokens[v.Client().Token()] = true
			v.mu.Unlock()
		}
		delete(tokens, "")
		refreshes(t, c, "k1")
		if len(tokens) < 3 {
			t.Errorf("%d tokens in 15s of a 4s max TTL, want the first and two after new logins", len(tokens))
		}
		relogins := count("vault approle login") // the first was before the counting logger
		if relogins < 2 {
			t.Errorf("%d new logins", relogins)
		}
		noToken(t, suiteLog.String(), keysOf(tokens)...)
		noToken(t, suiteLog.String(), e.root)
		if !t.Failed() {
			vaultreal.Count(t, "approle_relogins", relogins)
		}
	})
	t.Run("AppRoleReloginAfterExpiry", func(t *testing.T) {
		// No Run: the token expires; the read's 403 makes the source log
		// in again and read.
		_, v, c := realSeeded(t, srv, func(e *vaultEnv) VaultAuth {
			rf, sf := realAppRole(t, e.admin, e, "2s", "2s")
			return VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf}
		})
		log, count := newCounting(t)
		v.log = log
		first := v.Client().Token()
		time.Sleep(3 * time.Second)
		refreshes(t, c, "k1")
		if v.Client().Token() == first || count("vault answered 403; logging in again") != 1 || count("vault approle login") != 1 {
			t.Errorf("token replaced %t, 403s %d, logins %d", v.Client().Token() != first,
				count("vault answered 403; logging in again"), count("vault approle login"))
		}
		if !t.Failed() {
			vaultreal.Count(t, "approle_relogins", 1)
		}
	})
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
