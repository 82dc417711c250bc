package config

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestCheckUnanswered: Check names the problems of a Vault key source
// that gave no answer (Unanswered: sealed, stopped, denied, its token
// file not there) apart from every other; aoctl validate refuses both,
// aokeyd's start and reload refuse only the others (Refused, Refusal).
// Whatever a source does return is never Unanswered: a key Vault returns
// that validate rejects, a file source's every problem, a key of an
// algorithm the kernel refuses.
func TestCheckUnanswered(t *testing.T) {
	const good = `{"name": "k1", "send_id": 1, "recv_id": 101, "algorithm": "hmac(sha256)", "secret_b64": "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhhLTdRdlg="}`
	const bad = `{"name": "k2", "send_id": 256, "recv_id": 102, "algorithm": "hmac(sha256)", "secret_b64": "YW9rZXlkLXRlc3Qtc2VjcmV0LWJyYXZvLTRLbVo="}`
	refuseSHA256 := func() (map[tcpao.Algorithm]error, string) {
		return map[tcpao.Algorithm]error{tcpao.HMACSHA256: errors.New("refused")}, "the test's kernel"
	}
	for _, tc := range []struct {
		name       string
		file       string // the key file's content ("" with Vault)
		keys       string // chain demo's keys in Vault, as JSON
		vault      func(*vaulttest.Server)
		token      string // "" the root token, "-" no token file
		algorithms func() (map[tcpao.Algorithm]error, string)
		unanswered bool // the one problem is Unanswered; else every problem is Refused
	}{
		{name: "vault sealed", keys: good, vault: (*vaulttest.Server).Seal, unanswered: true},
		{name: "vault stopped", keys: good, vault: (*vaulttest.Server).Stop, unanswered: true},
		{name: "vault denies the token", keys: good, token: "not-a-token", unanswered: true},
		{name: "no token file", keys: good, token: "-", unanswered: true},
		{name: "vault returns a rejected key", keys: good + ", " + bad},
		{name: "vault returns a key the kernel refuses", keys: good, algorithms: refuseSHA256},
		{name: "key file missing"},
		{name: "key file with a rejected key", file: "chains:\n  demo:\n    peers: [192.0.2.2, \"2001:db8::2\"]\n    keys:\n" +
			"      - {name: k1, send_id: 256, recv_id: 101, algorithm: hmac(sha256), secret_hex: 6b6579}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pol, err := os.ReadFile(filepath.Join("testdata", "policy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), pol, 0o600); err != nil {
				t.Fatal(err)
			}
			source := "key_source:\n  type: file\n  file:\n    path: keys.yaml\n"
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "keys.yaml"), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.keys != "" {
				srv := vaultWith(t, `{"peers": ["192.0.2.2", "2001:db8::2"], "keys": [`+tc.keys+`]}`)
				token := tc.token
				if token == "" {
					token = srv.RootToken()
				}
				if token != "-" {
					if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if tc.vault != nil {
					tc.vault(srv)
				}
				source = "key_source:\n  type: vault\n  vault:\n    address: " + srv.URL() + "\n    auth:\n      token_file: token\n"
			}
			cfg := filepath.Join(dir, "aokeyd.yaml")
			if err := os.WriteFile(cfg, []byte(source+"policy:\n  path: policy.yaml\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("VAULT_MAX_RETRIES", "0")
			ch := Check(context.Background(), cfg, CheckOptions{Algorithms: tc.algorithms})
			ch.Snapshot.Zero()
			if len(ch.Problems) == 0 {
				t.Fatal("no problem found")
			}
			want := 0
			if tc.unanswered {
				want = 1
			}
			if len(ch.Unanswered) != want || len(ch.Refused()) != len(ch.Problems)-want || (ch.Refusal() == nil) != tc.unanswered {
				t.Errorf("problems %q: unanswered %q, refused %q, refusal %v; want %d unanswered", ch.Problems, ch.Unanswered, ch.Refused(), ch.Refusal(), want)
			}
		})
	}
}

// vaultWith is a test Vault holding chain demo as doc.
func vaultWith(t *testing.T, doc string) *vaulttest.Server {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal([]byte(doc), &data); err != nil {
		t.Fatal(err)
	}
	return vaulttest.Holding(t, "aokeyd/chains/demo", data)
}
