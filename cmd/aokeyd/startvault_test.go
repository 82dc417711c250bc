package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// TestStartWithVault: a Vault key source that gives no answer at start
// (sealed, stopped, or not letting aokeyd in yet) is waited for, as a
// reboot where Vault comes up later needs: aokeyd starts (READY=1) and
// says so in one log line. Keys Vault does return are checked as aoctl
// validate checks them: a key validate rejects refuses the start, in
// validate's words, no secret shown.
func TestStartWithVault(t *testing.T) {
	good := map[string]any{"name": "k1", "send_id": 1, "recv_id": 101, "algorithm": "hmac(sha256)", "secret_b64": startSecretB64}
	bad := map[string]any{"name": "k2", "send_id": 256, "recv_id": 102, "algorithm": "hmac(sha256)", "secret_b64": startOtherB64}
	pasted := map[string]any{"name": "k2", "send_id": 2, "recv_id": startPastedSecret, "algorithm": "hmac(sha256)", "secret_b64": startOtherB64}
	for _, tc := range []struct {
		name    string
		keys    []any                   // chain demo's keys in Vault
		vault   func(*vaulttest.Server) // what Vault is like at start
		token   string                  // the token file's content: "" the server's root token, "-" no file
		problem string                  // in validate's problems; "": aokeyd waits for Vault
	}{
		{name: "sealed: waited for", keys: []any{good}, vault: (*vaulttest.Server).Seal},
		{name: "stopped: waited for", keys: []any{good}, vault: (*vaulttest.Server).Stop},
		{name: "bad token: waited for", keys: []any{good}, token: "not-a-token"},
		{name: "no token file yet: waited for", keys: []any{good}, token: "-"},
		{name: "a rejected key refuses", keys: []any{good, bad}, problem: "keys[1].send_id"},
		{name: "a secret pasted into recv_id refuses", keys: []any{good, pasted}, problem: "recv_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := map[string]any{"peers": []any{"192.0.2.2", "2001:db8::2"}, "keys": tc.keys}
			srv := vaulttest.Holding(t, "aokeyd/chains/demo", doc)

			dir := t.TempDir()
			cfgPath := initTestConfig(t, dir)
			tokenFile := filepath.Join(dir, "vault-token")
			replaceInFile(t, cfgPath, "key_source:\n  type: file\n  file:\n    path: "+filepath.Join(dir, "keys.yaml")+"\n",
				"key_source:\n  type: vault\n  vault:\n    address: "+srv.URL()+"\n    auth:\n      token_file: "+tokenFile+"\n")
			token := tc.token
			if token == "" {
				token = srv.RootToken()
			}
			if token != "-" {
				if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var lines []string
			if tc.problem != "" {
				lines = validateLines(t, cfgPath, tc.problem, config.CheckOptions{})
			}
			if tc.vault != nil {
				tc.vault(srv)
			}

			// No retries: each read's first answer is the answer.
			stderr, msgs, err := runStartCheck(t, cfgPath, filepath.Join(dir, "state"), "VAULT_MAX_RETRIES=0")
			if tc.problem != "" {
				assertRefused(t, stderr, msgs, err, lines)
				return
			}
			noTestSecret(t, stderr)
			ready := false
			for _, m := range msgs {
				ready = ready || strings.Contains(m, "READY=1")
			}
			if !ready {
				t.Fatalf("aokeyd did not start (%v) with a Vault that gives no answer; stderr:\n%s", err, redactTestSecrets(stderr))
			}
			if n := strings.Count(stderr, startWaitsMsg); n != 1 {
				t.Errorf("aokeyd logged %q %d times, want once; stderr:\n%s", startWaitsMsg, n, redactTestSecrets(stderr))
			}
			// A start that passed its checks wrote the key it chose.
			if st, err := os.Stat(filepath.Join(dir, "state", fingerprintKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("fingerprint key after the start: %v %v, want a 0600 file", st, err)
			}
		})
	}
}
