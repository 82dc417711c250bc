package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// A secret of the test suite, pasted where it does not belong: no output
// may show it.
const pastedSecret = "aokeydTestPastedSecretQx7vLm2Rb9Tz4Wc1"

// TestValidateRefusals: every problem validate prints, whichever file it
// is in (the config, the policy, the key file), has the one shape
// FILE:LINE:COL: FIELD: PROBLEM (; HINT), with YAML's own punctuation in a
// syntax error, what to do where the problem does not say it, and never a
// value pasted on the wrong line. Each refusal is one case, classified by
// its typed reason (errors.Is on config.Check's problem), its text pinned
// in testdata/validate-refusals.golden and its --json form checked to be
// objects with the same parts. On the tree before issue 49 item 8, key
// source problems read "key source file PATH: file PATH:14: ...", config
// problems had no column, a YAML syntax error read "did not find expected
// (not shown) or (not shown)", and none of the hints was there.
func TestValidateRefusals(t *testing.T) {
	const keyFileAsConfig = "keys.yaml"
	tests := []struct {
		name   string
		edits  [][3]string
		files  map[string]string // written as they are, beside the testdata copies
		mode   os.FileMode       // of keys.yaml; 0: 0600
		config string            // the file validated; "": aokeyd.yaml
		reason error             // the first problem's typed reason
	}{
		{name: "config: YAML syntax keeps YAML's punctuation",
			files:  map[string]string{"aokeyd.yaml": "key_source:\n  type: file\n  file: {path: keys.yaml\npolicy:\n  path: policy.yaml\n"},
			reason: keystore.ErrSyntax},
		{name: "config: a value refused, at its line and column",
			edits:  [][3]string{{"aokeyd.yaml", "policy:\n", "log:\n  level: loud\npolicy:\n"}},
			reason: keystore.ErrInvalid},
		{name: "config: a secret pasted into a field is not shown",
			edits:  [][3]string{{"aokeyd.yaml", "policy:\n", "log:\n  level: " + pastedSecret + "\npolicy:\n"}},
			reason: keystore.ErrInvalid},
		{name: "config: token under vault names VAULT_TOKEN and auth.token_file",
			files: map[string]string{"aokeyd.yaml": "key_source:\n  type: vault\n  vault:\n    address: https://vault.example:8200\n" +
				"    token: " + pastedSecret + "\npolicy:\n  path: policy.yaml\n"},
			reason: keystore.ErrUnknownField},
		{name: "config: token under vault.auth", files: map[string]string{"aokeyd.yaml": "key_source:\n  type: vault\n  vault:\n" +
			"    auth:\n      token: " + pastedSecret + "\npolicy:\n  path: policy.yaml\n"},
			reason: keystore.ErrUnknownField},
		{name: "config: a key file given as the config", config: keyFileAsConfig, reason: config.ErrKeyFileAsConfig},
		{name: "config: a policy given as the config", config: "policy.yaml", reason: config.ErrPolicyAsConfig},
		{name: "config: none there", config: "nothere.yaml", reason: config.ErrUnreadable},
		{name: "config: the policy file is not there",
			edits: [][3]string{{"aokeyd.yaml", "path: policy.yaml", "path: gone.yaml"}}, reason: policy.ErrUnreadable},
		{name: "key file: mode 0644 names allow_group_readable",
			edits: [][3]string{{"aokeyd.yaml", "    allow_group_readable: true\n", ""}}, mode: 0o644, reason: keystore.ErrInsecureFile},
		{name: "key file: not there", edits: [][3]string{{"aokeyd.yaml", "path: keys.yaml", "path: gone-keys.yaml"}},
			reason: keystore.ErrUnreadable},
		{name: "key file: YAML syntax keeps YAML's punctuation, at its line",
			edits: [][3]string{{"keys.yaml", "peers: [192.0.2.0/24]", "peers: [192.0.2.0/24"}}, reason: keystore.ErrSyntax},
		{name: "key file: a value refused, at its line and column",
			edits: [][3]string{{"keys.yaml", "send_id: 10", "send_id: 300"}}, reason: keystore.ErrInvalid},
		{name: "key file: a secret pasted into a field is not shown",
			edits: [][3]string{{"keys.yaml", "recv_id: 110", "recv_id: " + pastedSecret}}, reason: keystore.ErrInvalid},
		{name: "policy: an unknown chain lists the chains there are",
			edits:  [][3]string{{"policy.yaml", "    key_chain: core\n  - neighbor: 192.0.2.3", "    key_chain: cor\n  - neighbor: 192.0.2.3"}},
			reason: policy.ErrUnknownChain},
		{name: "policy: a secret pasted as the chain is not shown",
			edits:  [][3]string{{"policy.yaml", "    key_chain: core\n  - neighbor: 192.0.2.3", "    key_chain: " + pastedSecret + "\n  - neighbor: 192.0.2.3"}},
			reason: policy.ErrUnknownChain},
		{name: "policy: a source key the key source lacks lists its keys",
			edits: [][3]string{{"policy.yaml", `name: "2026-11"`, `name: "2026-12"`}}, reason: policy.ErrUnknownKey},
	}
	var b strings.Builder
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := copyTestdata(t, tc.edits...)
			dir := filepath.Dir(cfg)
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mode != 0 {
				if err := os.Chmod(filepath.Join(dir, "keys.yaml"), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			if tc.config != "" {
				cfg = filepath.Join(dir, tc.config)
			}
			ch := config.Check(context.Background(), cfg, config.CheckOptions{Now: testNow})
			ch.Snapshot.Zero()
			if len(ch.Problems) == 0 || !errors.Is(ch.Problems[0], tc.reason) {
				t.Errorf("problems %q, want the first to be %q", ch.Problems, tc.reason)
			}
			args := []string{"validate", "--no-kernel", "--at", "2026-10-15", cfg}
			r := runAoctl(t, "", args...)
			if r.code != exitInvalid {
				t.Errorf("exit %d, want %d", r.code, exitInvalid)
			}
			out := strings.ReplaceAll(r.stdout+r.stderr, dir, "DIR")
			fmt.Fprintf(&b, "## %s\n$ aoctl validate DIR/%s\n%s\n", tc.name, filepath.Base(cfg), out)
			j := runAoctl(t, "", append(args, "--json")...)
			var res struct {
				Config   string            `json:"config"`
				OK       bool              `json:"ok"`
				Problems []keystore.Report `json:"problems"`
				Warnings []keystore.Report `json:"warnings"`
			}
			dec := json.NewDecoder(strings.NewReader(j.stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&res); err != nil {
				t.Fatalf("--json: %v\n%s", err, j.stdout)
			}
			var lines []string
			for _, p := range res.Problems {
				lines = append(lines, p.String())
			}
			if text := strings.Join(lines, "\n") + "\n"; j.code != exitInvalid || res.OK || !strings.HasPrefix(r.stdout, text) {
				t.Errorf("--json: exit %d ok %v, its problems as text\n%s\nare not the text's\n%s", j.code, res.OK, text, r.stdout)
			}
			for _, s := range []string{r.stdout, r.stderr, j.stdout, j.stderr} {
				if strings.Contains(s, pastedSecret) {
					t.Errorf("the output shows the pasted secret:\n%s", s)
				}
			}
		})
	}
	golden(t, "validate-refusals.golden", b.String())
}
