package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// serveVersion serves the test daemon with a version and a start time,
// as aokeyd fills /v1/health.
func serveVersion(t *testing.T, v string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "control.sock")
	l, err := control.Listen(sock, control.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := control.NewServer(control.ServerOptions{Backend: newTestDaemon(t), Version: v, Started: testNow.Add(-26 * time.Hour)})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return sock
}

func TestVersion(t *testing.T) {
	sock := serveVersion(t, "1.4.0")
	none := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		name   string
		socket string
		args   []string
		golden string
		want   []string
	}{
		{"daemon answers", sock, []string{"version"}, "version.golden", nil},
		{"daemon answers json", sock, []string{"version", "--json"}, "version.json.golden", nil},
		// No daemon is no failure: aoctl's own version is what was asked.
		{"no daemon", none, []string{"version"}, "", []string{"aoctl dev\n", "aokeyd: no answer on " + none}},
		{"no daemon json", none, []string{"--json", "version"}, "", []string{`"aoctl": "dev"`, `"daemon_error": "daemon unreachable`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAoctl(t, tc.socket, tc.args...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if tc.golden != "" {
				golden(t, tc.golden, strings.ReplaceAll(r.stdout, tc.socket, "SOCKET"))
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// Every command answers --json with one JSON document on stdout, whatever
// its outcome (peer-config printed its text before).
func TestEveryCommandHonoursJSON(t *testing.T) {
	sock, _ := startDaemon(t)
	none := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args   []string
		socket string
		code   int
	}{
		{[]string{"status"}, sock, exitOK},
		{[]string{"status", "192.0.2.2"}, sock, exitOK},
		{[]string{"plan"}, sock, exitOK},
		{[]string{"plan", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15"}, none, exitOK},
		{[]string{"rotate", "--all"}, sock, exitOK},
		{[]string{"revoke", "core/2026-11", "--peer", "192.0.2.3"}, sock, exitOK},
		{[]string{"adopt", "192.0.2.2"}, sock, exitOK},
		{[]string{"validate", "testdata/aokeyd.yaml", "--no-kernel", "--at", "2026-10-15"}, none, exitOK},
		{[]string{"peer-config", "192.0.2.2", "--config", "testdata/aokeyd.yaml", "--for", "bird", "--at", "2026-10-15"}, none, exitOK},
		{[]string{"peer-config", "192.0.2.2", "--config", "testdata/aokeyd.yaml", "--for", "junos", "--at", "2026-10-15"}, none, exitInvalid},
		{[]string{"version"}, sock, exitOK},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.args[0]] = true
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runAoctl(t, tc.socket, append(tc.args, "--json")...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatalf("stdout is no JSON object: %v\n%s", err, r.stdout)
			}
		})
	}
	// The commands this test does not run: the daemon-changing ones whose
	// JSON the daemon tests cover (replace, migrate), and the fleet's
	// (fleet_test.go).
	for _, c := range commands() {
		if !covered[c.name] && c.name != "replace" && c.name != "migrate" && c.name != "fleet" {
			t.Errorf("aoctl %s --json is not tested here", c.name)
		}
	}
}

// peer-config --json: the rendering as a string, or what was refused.
func TestPeerConfigJSON(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	base := []string{"peer-config", "192.0.2.2", "--config", "testdata/aokeyd.yaml", "--json"}
	r := runAoctl(t, none, append(base, "--for", "bird", "--at", "2026-10-15", "--local", "192.0.2.1")...)
	var res peerConfigResult
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != exitOK || err != nil {
		t.Fatalf("exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	plain := runAoctl(t, none, "peer-config", "192.0.2.2", "--config", "testdata/aokeyd.yaml", "--for", "bird", "--at", "2026-10-15", "--local", "192.0.2.1")
	if res.Config != plain.stdout || res.For != "bird" || res.Peer != "192.0.2.2" || len(res.Refused) != 0 {
		t.Errorf("--json config differs from the text rendering: %+v", res)
	}
	r = runAoctl(t, none, append(base, "--for", "junos", "--at", "2026-10-15")...)
	res = peerConfigResult{}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != exitInvalid || err != nil || res.Config != "" || len(res.Refused) == 0 ||
		res.Refused[0].Key != "2026-10" || !strings.Contains(res.Refused[0].Reason, "Junos TCP-AO offers") {
		t.Errorf("refusal: exit %d, %v: %+v\n%s", r.code, err, res, r.stderr)
	}
}
