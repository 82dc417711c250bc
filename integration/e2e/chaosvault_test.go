package e2e

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
	"github.com/aokeyd/aokeyd/internal/vaultreal/faultproxy"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// chaosVault is the chaos fleet's Vault and its faults: real Vault behind
// a fault proxy (make chaos: AOKEYD_VAULT names the binary), or the test
// server (make test's short run, where no Vault is in the guest). The
// fleet's aokeyds, its aoctl and the scenario's own writes all use URL and
// Token; every fault applies to each of them alike, as the test server's
// do.
type chaosVault interface {
	Name() string // for the chaos log: "1.21.0 (real)", "vaulttest"
	URL() string
	Token() string
	Stop()
	Start() error
	Seal()
	Unseal()
	Deny(prefix string) // 403 for paths under prefix, until Undeny
	Undeny(prefix string)
	Fail(prefix string, status int)       // 0 ends it
	Delay(prefix string, d time.Duration) // 0 ends it
}

// newChaosVault is real Vault when AOKEYD_VAULT is set (or required),
// else the test server.
func newChaosVault(t *testing.T) chaosVault {
	t.Helper()
	if os.Getenv("AOKEYD_VAULT") != "" || os.Getenv("AOKEYD_REQUIRE_VAULT") == "1" {
		return newRealChaosVault(t)
	}
	v, err := vaulttest.New(vaulttest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return fakeChaosVault{v}
}

// fakeChaosVault is the test server, with its root token.
type fakeChaosVault struct{ *vaulttest.Server }

func (fakeChaosVault) Name() string    { return "vaulttest" }
func (v fakeChaosVault) Token() string { return v.RootToken() }

// realChaosVault is a real Vault with its data on disk (raft) (it can be sealed, and
// stopped and started with its data: vaultreal.StartStored) behind a fault
// proxy (slow answers, 500s). Its clients use a token of policy
// chaosPolicy, never the root token, so that a Deny (a policy line) holds
// for every client, as the test server's does.
//
// Invariants: the policy in Vault is chaosPolicy's text for the denials in
// force whenever Vault is up and unsealed (a change while it is stopped or
// sealed is written when it comes back, before Start or Unseal returns);
// a Start while a Seal holds leaves it sealed, as the test server's does.
type realChaosVault struct {
	t     *testing.T
	srv   *vaultreal.Server
	px    *faultproxy.Proxy
	admin *vaultapi.Client // root, straight to Vault: not faulted
	token string

	mu           sync.Mutex
	deny         []string // prefixes, once per Deny in force
	down, sealed bool
}

const chaosPolicy = "aokeyd-chaos"

func newRealChaosVault(t *testing.T) *realChaosVault {
	t.Helper()
	srv := vaultreal.StartStored(t)
	v := &realChaosVault{t: t, srv: srv, px: faultproxy.Start(t, srv.Addr), admin: srv.Client()}
	v.mu.Lock()
	v.writePolicy()
	v.mu.Unlock()
	renewable := true
	s, err := v.admin.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{chaosPolicy},
		DisplayName: "chaos", TTL: "24h", Renewable: &renewable})
	if err != nil || s == nil || s.Auth == nil {
		t.Fatalf("chaos vault: token create: %v", err)
	}
	v.token = s.Auth.ClientToken
	return v
}

func (v *realChaosVault) Name() string  { return v.srv.Version + " (real)" }
func (v *realChaosVault) URL() string   { return v.px.URL() }
func (v *realChaosVault) Token() string { return v.token }

// policyText is the fleet's policy: all of secret/, but the denied
// prefixes.
func (v *realChaosVault) policyText() string {
	var b strings.Builder
	b.WriteString("path \"secret/*\" { capabilities = [\"create\", \"read\", \"update\", \"delete\", \"list\"] }\n")
	seen := map[string]bool{}
	for _, p := range v.deny {
		if !seen[p] {
			seen[p] = true
			fmt.Fprintf(&b, "path %q { capabilities = [\"deny\"] }\n", p+"*")
		}
	}
	return b.String()
}

// writePolicy writes the policy when Vault can take it (v.mu held).
func (v *realChaosVault) writePolicy() {
	if v.down || v.sealed {
		return
	}
	if err := v.admin.Sys().PutPolicy(chaosPolicy, v.policyText()); err != nil {
		v.t.Errorf("chaos vault: policy: %v", err)
	}
}

func (v *realChaosVault) Stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.down = true
	v.srv.Stop()
}

// Start starts the Vault process again; it comes back unsealed, with the
// policy of now, and is sealed again if a Seal holds.
func (v *realChaosVault) Start() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	sealed := v.sealed
	v.srv.Restart()
	v.down, v.sealed = false, false
	v.writePolicy()
	if sealed {
		v.srv.Seal()
		v.sealed = true
	}
	return nil
}

func (v *realChaosVault) Seal() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.down && !v.sealed {
		v.srv.Seal()
	}
	v.sealed = true
}

func (v *realChaosVault) Unseal() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.down && v.sealed {
		v.srv.Unseal()
	}
	v.sealed = false
	v.writePolicy()
}

func (v *realChaosVault) Deny(prefix string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deny = append(v.deny, prefix)
	v.writePolicy()
}

func (v *realChaosVault) Undeny(prefix string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if i := slices.Index(v.deny, prefix); i >= 0 {
		v.deny = slices.Delete(v.deny, i, i+1)
	}
	v.writePolicy()
}

func (v *realChaosVault) Fail(prefix string, status int)       { v.px.Fail(prefix, status) }
func (v *realChaosVault) Delay(prefix string, d time.Duration) { v.px.Slow(prefix, d) }

// TestChaosVault: the chaos fleet's real Vault answers each fault as the
// test server does, seen by a client with URL and Token: a Deny is a 403
// under its prefix only, a Fail that status, a Delay a late answer, a Seal
// Vault's 503, a Stop no answer; each ends with its undoing, the data
// kept; a Start while a Seal holds leaves Vault sealed, and a Deny made
// while Vault is sealed holds once it is unsealed. Runs on the host; the
// real kind only when AOKEYD_VAULT names a Vault (make chaos's guest has
// one), so that no run of it ever skips.
func TestChaosVault(t *testing.T) {
	kinds := []string{"vaulttest"}
	if os.Getenv("AOKEYD_VAULT") != "" || os.Getenv("AOKEYD_REQUIRE_VAULT") == "1" {
		kinds = append(kinds, "real")
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "real" {
				t.Setenv("AOKEYD_REQUIRE_VAULT", "1")
			} else {
				t.Setenv("AOKEYD_VAULT", "")
				t.Setenv("AOKEYD_REQUIRE_VAULT", "")
			}
			v := newChaosVault(t)
			cfg := vaultapi.DefaultConfig()
			cfg.Address, cfg.MaxRetries, cfg.Timeout = v.URL(), 0, 2*time.Second
			c, err := vaultapi.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.SetToken(v.Token())
			ctx := t.Context()
			kv := c.KVv2("secret")
			for _, p := range []string{"aokeyd/g1/chains/core", "aokeyd/g2/chains/core"} {
				if _, err := kv.Put(ctx, p, map[string]any{"k": "v"}); err != nil {
					t.Fatalf("put %s: %v", p, err)
				}
			}
			// status reads g1's chain and g2's: Vault's status for each
			// (200, or what it answered; 0: no answer).
			status := func() (g1, g2 int) {
				st := func(p string) int {
					_, err := kv.Get(ctx, p)
					var re *vaultapi.ResponseError
					switch {
					case err == nil:
						return 200
					case errors.As(err, &re):
						return re.StatusCode
					}
					return 0
				}
				return st("aokeyd/g1/chains/core"), st("aokeyd/g2/chains/core")
			}
			deny := "secret/data/aokeyd/g1/"
			for _, step := range []struct {
				name   string
				do     func()
				g1, g2 int
			}{
				{"Deny", func() { v.Deny(deny) }, 403, 200},
				{"DenyTwiceUndenyOnce", func() { v.Deny(deny); v.Undeny(deny) }, 403, 200},
				{"Undeny", func() { v.Undeny(deny) }, 200, 200},
				{"Fail", func() { v.Fail(deny, 500) }, 500, 200},
				{"FailEnds", func() { v.Fail(deny, 0) }, 200, 200},
				{"Sealed", v.Seal, 503, 503},
				{"DenyWhileSealed", func() { v.Deny(deny) }, 503, 503},
				{"Stopped", v.Stop, -1, -1},
				{"StartedStillSealed", func() {
					if err := v.Start(); err != nil {
						t.Fatal(err)
					}
				}, 503, 503},
				{"UnsealedDenyHolds", v.Unseal, 403, 200},
				{"AllBack", func() { v.Undeny(deny) }, 200, 200},
			} {
				step.do()
				g1, g2 := status()
				if step.g1 == -1 { // stopped: no answer (the test server) or the proxy's 502
					if g1 != 0 && g1 != 502 || g2 != 0 && g2 != 502 {
						t.Errorf("%s: g1 %d, g2 %d; want no answer", step.name, g1, g2)
					}
					continue
				}
				if g1 != step.g1 || g2 != step.g2 {
					t.Errorf("%s: g1 %d, g2 %d; want %d, %d", step.name, g1, g2, step.g1, step.g2)
				}
			}
			v.Delay("", 300*time.Millisecond)
			start := time.Now()
			if g1, _ := status(); g1 != 200 || time.Since(start) < 600*time.Millisecond {
				t.Errorf("Delay: g1 %d in %v; want 200, two reads at least 300ms each", g1, time.Since(start))
			}
			v.Delay("", 0)
			if got, err := kv.Get(ctx, "aokeyd/g2/chains/core"); err != nil || got.Data["k"] != "v" {
				t.Errorf("the data after the faults: %v %v", got, err)
			}
		})
	}
}
