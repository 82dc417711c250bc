package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noechoToken is a test secret (keystore/testdata/test-secrets.txt) that
// stands for a Vault token pasted into the wrong field of aokeyd.yaml.
const noechoToken = "aokeyd-test-token-golf-6Vb"

// TestConfigValueNotEchoed pastes a Vault token into each field of
// aokeyd.yaml it could land in, and runs the checks aoctl validate and
// aokeyd run (Check, key source included): every problem names the file,
// the line and the field, and none shows the value, which the log keeps
// and validate prints. They used to quote it ("key_source.vault.address:
// invalid value: \"TOKEN\" is not an http(s) URL").
func TestConfigValueNotEchoed(t *testing.T) {
	vault := "key_source:\n  type: vault\n  vault:\n    address: ADDRESS\n    auth:\n      token_file: TOKENFILE\npolicy:\n  path: policy.yaml\n"
	for _, tc := range []struct {
		field, config string
		edits         [2]string // ADDRESS, TOKENFILE
	}{
		{"key_source.vault.address", vault, [2]string{"V", "token"}},
		{"key_source.vault.auth.token_file", vault, [2]string{"http://127.0.0.1:1", "V"}},
		{"key_source.vault.auth.method", strings.Replace(vault, "auth:\n", "auth:\n      method: V\n", 1), [2]string{"http://127.0.0.1:1", "token"}},
		{"key_source.type", "key_source:\n  type: V\npolicy:\n  path: policy.yaml\n", [2]string{}},
		{"key_source.refresh", "key_source:\n  type: file\n  refresh: V\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\n", [2]string{}},
		{"log.level", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\nlog:\n  level: V\n", [2]string{}},
		{"control.group", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\ncontrol:\n  group: V\n", [2]string{}},
		{"control.mode", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\ncontrol:\n  mode: V\n", [2]string{}},
		{"metrics.listen", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\nmetrics:\n  listen: V\n", [2]string{}},
		{"speaker.type", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\nspeaker:\n  type: V\n", [2]string{}},
		{"gobgp.address", "key_source:\n  type: file\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\ngobgp:\n  address: V\n", [2]string{}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "token"), []byte("x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			pol := "version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 192.0.2.1\n    key_chain: core\n"
			if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := strings.NewReplacer("ADDRESS", tc.edits[0], "TOKENFILE", tc.edits[1]).Replace(tc.config)
			cfg = strings.ReplaceAll(cfg, ": V\n", ": "+noechoToken+"\n")
			path := filepath.Join(dir, "aokeyd.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			ch := Check(context.Background(), path, CheckOptions{})
			defer ch.Snapshot.Zero()
			if ch.OK() {
				t.Fatal("no problem found")
			}
			named := false
			for _, p := range ch.Problems {
				msg := p.Error()
				if strings.Contains(msg, noechoToken) || strings.Contains(msg, noechoToken[:12]) {
					t.Errorf("problem shows the pasted value: %q", strings.ReplaceAll(msg, noechoToken, "<TOKEN>"))
				}
				if strings.Contains(msg, tc.field) && strings.Contains(msg, path+":") {
					named = true
				}
			}
			if !named {
				t.Errorf("no problem names %s:LINE and the field %s: %q", path, tc.field, ch.Problems)
			}
		})
	}
}
