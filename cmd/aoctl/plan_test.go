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

// TestPlanStepsNameKeys: each step of `aoctl plan --config` that adds or
// deletes a key names its chain and key (never its secret), in the table
// and in --json, where every step is also an object (socket, kind, op,
// key reference, chain, key, reason) beside the plan's lines, which stay
// as they were for their readers; and "no scheduled changes" says within
// which horizon. Steps used to be lines only, naming a key by its IDs.
func TestPlanStepsNameKeys(t *testing.T) {
	const secret = "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhhLTdRdlg=" // core/2026-10's, testdata/keys.yaml
	args := []string{"plan", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15"}
	none := filepath.Join(t.TempDir(), "none.sock")

	r := runAoctl(t, none, args...)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, peer := range []string{"192.0.2.2", "192.0.2.3"} {
		want := "  peer " + peer + " listening 1. add core/2026-10 send=10 recv=110 peer=" + peer + "/32 "
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the plan does not name the key added: no %q in\n%s", want, r.stdout)
		}
	}

	j := runAoctl(t, none, append(args, "--json")...)
	var rep struct {
		Plan  []string `json:"plan"`
		Steps []struct {
			Socket string `json:"socket"`
			Kind   string `json:"kind"`
			Op     string `json:"op"`
			KeyRef *struct {
				SendID int    `json:"send_id"`
				RecvID int    `json:"recv_id"`
				Peer   string `json:"peer"`
			} `json:"key_ref"`
			Chain  string `json:"chain"`
			Key    string `json:"key"`
			Reason string `json:"reason"`
			Text   string `json:"text"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, j.stdout)
	}
	if strings.Contains(r.stdout+j.stdout, secret) {
		t.Fatal("the plan shows a key's secret")
	}
	if len(rep.Steps) != 4 || len(rep.Plan) != len(rep.Steps) {
		t.Fatalf("--json: %d steps for %d plan lines, want 4 of each:\n%s", len(rep.Steps), len(rep.Plan), j.stdout)
	}
	for i, s := range rep.Steps {
		// The plan's lines keep their form (readers match "N. add send=10
		// recv=110"); the step's text names the key after the verb.
		if want := strings.Replace(rep.Plan[i], ". add send=", ". add core/2026-10 send=", 1); s.Text != want {
			t.Errorf("step %d's text %q, want %q (plan line %q named)", i, s.Text, want, rep.Plan[i])
		}
		peer := []string{"192.0.2.2", "192.0.2.2", "192.0.2.3", "192.0.2.3"}[i]
		if s.Socket != "peer "+peer || s.Kind != "listening" {
			t.Errorf("step %d: socket %q kind %q, want peer %s, listening", i, s.Socket, s.Kind, peer)
		}
		switch i % 2 {
		case 0:
			if s.Op != "add" || s.Chain != "core" || s.Key != "2026-10" || s.Reason != "new" ||
				s.KeyRef == nil || s.KeyRef.SendID != 10 || s.KeyRef.RecvID != 110 || s.KeyRef.Peer != peer+"/32" {
				t.Errorf("step %d: %+v, want add of core/2026-10 (send 10, recv 110, peer %s/32), reason new", i, s, peer)
			}
		case 1:
			if s.Op != "set" || s.Chain != "" || s.Key != "" || s.KeyRef != nil || s.Reason != "ao-required" {
				t.Errorf("step %d: %+v, want set, about no key, reason ao-required", i, s)
			}
		}
	}

	for _, tc := range []struct{ horizon, want string }{
		{"1d", "no scheduled changes within 1d"},
		{"15d", "no scheduled changes within 15d"},
	} {
		// testdata's keys change first on 2026-10-31, 16 days on.
		q := runAoctl(t, none, "plan", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15", "--horizon", tc.horizon)
		if q.code != exitOK || !strings.Contains(q.stdout, "\n  "+tc.want+"\n") {
			t.Errorf("--horizon %s: exit %d, want %q in\n%s%s", tc.horizon, q.code, tc.want, q.stdout, q.stderr)
		}
	}
}
