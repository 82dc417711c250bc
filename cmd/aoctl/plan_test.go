package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestPlanOfflineRejectedKeys: `aoctl plan --config` with keys the key
// source rejects (a misspelt field, a KeyID out of range) prints each
// rejection in the words `aoctl validate` prints it and exits 4, and
// never plans ao-required for a peer left with no key to send with (a
// listener that requires TCP-AO without a key refuses every connection).
// It used to print only "set ao-required=true" for each peer and exit 0.
func TestPlanOfflineRejectedKeys(t *testing.T) {
	// testdata's chain core at 2026-10-15: 2026-10 sends, 2026-11 is not
	// installed yet (accepted from 2026-10-31). Its peers: 192.0.2.2, .3.
	for _, tc := range []struct {
		name     string
		old, new string // one edit of testdata/keys.yaml
		code     int
		rejected bool // validate reports a rejected key
		required bool // the plan sets ao-required for core's peers
	}{
		{"as is", "", "", exitOK, false, true},
		{"secret_b46 on the key sent with", `secret_b64: "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhh`, `secret_b46: "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhh`, exitInvalid, true, false},
		{"send_id 256 on the key sent with", "send_id: 10\n", "send_id: 256\n", exitInvalid, true, false},
		{"secret_b46 on the next key", `secret_b64: "YW9rZXlkLXRlc3Qtc2VjcmV0LWJyYXZv`, `secret_b46: "YW9rZXlkLXRlc3Qtc2VjcmV0LWJyYXZv`, exitInvalid, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"aokeyd.yaml", "policy.yaml", "keys.yaml"} {
				b, err := os.ReadFile(filepath.Join("testdata", f))
				if err != nil {
					t.Fatal(err)
				}
				if f == "keys.yaml" && tc.old != "" {
					if !strings.Contains(string(b), tc.old) {
						t.Fatalf("testdata/keys.yaml has no %q", tc.old)
					}
					b = []byte(strings.Replace(string(b), tc.old, tc.new, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(dir, "aokeyd.yaml")
			none := filepath.Join(dir, "none.sock")

			// validate's lines about the key file: the rejections.
			v := runAoctl(t, none, "validate", "--no-kernel", cfg, "--at", "2026-10-15")
			var rejected []string
			for _, l := range strings.Split(v.stdout, "\n") {
				if strings.Contains(l, "keys.yaml:") {
					rejected = append(rejected, l)
				}
			}
			if (len(rejected) > 0) != tc.rejected {
				t.Fatalf("validate reports rejected keys %q, want some: %v (the edit is not the one meant)\n%s", rejected, tc.rejected, v.stdout)
			}

			r := runAoctl(t, none, "plan", "--config", cfg, "--at", "2026-10-15")
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%sstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, l := range rejected {
				if !strings.Contains(r.stdout, l) {
					t.Errorf("plan does not print validate's %q:\n%s", l, r.stdout)
				}
			}
			if tc.code != exitOK && !strings.Contains(r.stderr, "problem") {
				t.Errorf("stderr does not say the plan has problems: %q", r.stderr)
			}
			j := runAoctl(t, none, "plan", "--config", cfg, "--at", "2026-10-15", "--json")
			if j.code != tc.code {
				t.Errorf("--json: exit %d, want %d", j.code, tc.code)
			}
			var rep control.PlanReport
			if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
				t.Fatalf("--json: %v\n%s", err, j.stdout)
			}
			for _, l := range rejected {
				if !strings.Contains(strings.Join(rep.Problems, "\n"), l) {
					t.Errorf("--json problems %q lack validate's %q", rep.Problems, l)
				}
			}
			if (len(rep.Problems) > 0) != (tc.code != exitOK) {
				t.Errorf("--json problems %q with exit %d", rep.Problems, j.code)
			}
			for _, peer := range []string{"192.0.2.2", "192.0.2.3"} {
				required := false
				for _, l := range rep.Plan {
					if strings.HasPrefix(l, "peer "+peer+" ") && strings.Contains(l, "ao-required=true") {
						required = true
					}
				}
				if required != tc.required {
					t.Errorf("peer %s: plan sets ao-required: %v, want %v:\n%s", peer, required, tc.required, strings.Join(rep.Plan, "\n"))
				}
			}
		})
	}
}
