package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// copyTestdata writes testdata's aokeyd.yaml, policy.yaml and keys.yaml to
// a temporary directory, each edit replacing old by new once in the file
// it names, and returns the config's path.
func copyTestdata(t *testing.T, edits ...[3]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"aokeyd.yaml", "policy.yaml", "keys.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range edits {
			if e[0] != f {
				continue
			}
			if !strings.Contains(string(b), e[1]) {
				t.Fatalf("testdata/%s has no %q", f, e[1])
			}
			b = []byte(strings.Replace(string(b), e[1], e[2], 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "aokeyd.yaml")
}

// demoSecret is the secret of the first key of `aokeyd init`'s demo key
// file (keystore.DefaultKeyFile), read from it.
func demoSecret(t *testing.T) string {
	t.Helper()
	for _, l := range strings.Split(string(keystore.DefaultKeyFile()), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "secret_b64: "); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatal("the demo key file has no secret_b64")
	return ""
}

// TestValidateWarnings: what validate passes but the operator must hear
// of is printed as a WARNING line naming file, line and field, and the
// exit status stays 0 (validate's exit status 4 is for problems): a
// policy binding whose vrf: names no VRF device on this machine (it would
// never match a session; --no-kernel, for another machine, skips it), and
// a key whose material is one of the public demo keys of `aokeyd init`,
// whatever its name. Validate used to print neither.
func TestValidateWarnings(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VRF devices are Linux's")
	}
	const binding = "  - neighbor: 192.0.2.3\n    key_chain: core\n"
	demo := demoSecret(t)
	tests := []struct {
		name  string
		edits [][3]string
		args  []string
		warn  []string // each a WARNING line holds these
	}{
		{"as is", nil, nil, nil},
		{"vrf that does not exist", [][3]string{{"policy.yaml", binding, binding + "    vrf: aokeyd-nonevrf\n"}}, nil,
			[]string{"policy.yaml:16:", "peers[1].vrf", `"aokeyd-nonevrf"`, "no VRF device", "never match"}},
		{"vrf that is not a VRF device", [][3]string{{"policy.yaml", binding, binding + "    vrf: lo\n"}}, nil,
			[]string{"policy.yaml:16:", "peers[1].vrf", `"lo"`, "not a VRF device"}},
		{"vrf, for another machine", [][3]string{{"policy.yaml", binding, binding + "    vrf: aokeyd-nonevrf\n"}}, []string{"--no-kernel"}, nil},
		{"demo key renamed", [][3]string{{"keys.yaml", "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhhLTdRdlg=", demo}}, nil,
			[]string{"keys.yaml:6:9: chains.core.keys[0]: ", `key "2026-10"`, "PUBLIC DEMO KEY", "aokeyd init", "replace"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := copyTestdata(t, tc.edits...)
			args := append([]string{"validate", cfg, "--at", "2026-10-15"}, tc.args...)
			r := runAoctl(t, "", args...)
			if r.code != exitOK {
				t.Fatalf("exit %d, want %d (warnings are not problems)\n%s%s", r.code, exitOK, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, demo) {
				t.Errorf("the output shows the demo key's secret")
			}
			var warnings []string
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "WARNING: ") {
					warnings = append(warnings, l)
				}
			}
			if len(tc.warn) == 0 {
				if len(warnings) != 0 {
					t.Errorf("warnings %q, want none", warnings)
				}
				return
			}
			if len(warnings) != 1 {
				t.Fatalf("warnings %q, want one\n%s", warnings, r.stdout)
			}
			for _, w := range tc.warn {
				if !strings.Contains(warnings[0], w) {
					t.Errorf("%q does not say %q", warnings[0], w)
				}
			}
			if !strings.Contains(r.stdout, ": ok (") {
				t.Errorf("validate does not say the config is ok:\n%s", r.stdout)
			}
			j := runAoctl(t, "", append(args, "--json")...)
			var res struct {
				OK       bool              `json:"ok"`
				Warnings []keystore.Report `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(j.stdout), &res); err != nil {
				t.Fatalf("--json: %v\n%s", err, j.stdout)
			}
			if j.code != exitOK || !res.OK || len(res.Warnings) != 1 || "WARNING: "+res.Warnings[0].String() != warnings[0] {
				t.Errorf("--json: exit %d ok %v warnings %q, want 0, true and %q", j.code, res.OK, res.Warnings, warnings[0])
			}
		})
	}
}

// TestValidateTimeoutBoundsVault: against a Vault that accepts and never
// answers, validate's --timeout bounds the key source's read: validate
// fails (exit 4) within about --timeout with a problem that names the key
// source and the timeout, instead of waiting for Vault's own (60 s). It
// used to ignore --timeout for the key source.
func TestValidateTimeoutBoundsVault(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // accepted, never answered
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) }) // runs first: unblocks the handlers
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("aokeyd-test-token-golf-6Vb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := copyTestdata(t)
	conf := fmt.Sprintf("key_source:\n  type: vault\n  vault:\n    address: %s\n    auth:\n      method: token\n      token_file: %s\npolicy:\n  path: policy.yaml\n", srv.URL, token)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"validate", []string{"validate", "--no-kernel", "--timeout", "300ms", cfg}},
		{"plan", []string{"plan", "--config", cfg, "--timeout", "300ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan result, 1)
			start := time.Now()
			go func() { done <- runAoctl(t, "", tc.args...) }()
			var r result
			select {
			case r = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("%s still waiting for Vault 15s after it began, with --timeout 300ms", tc.name)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %v with --timeout 300ms", took)
			}
			out := r.stdout + r.stderr
			if r.code == exitOK || !strings.Contains(out, "no answer within 300ms") || !strings.Contains(out, "--timeout") {
				t.Errorf("exit %d, want a failure that names the timeout and --timeout:\n%s", r.code, out)
			}
			if strings.Contains(out, "aokeyd-test-token-golf-6Vb") {
				t.Error("the output shows the Vault token")
			}
		})
	}
}
