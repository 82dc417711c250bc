package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The key file's secrets in these tests, and one pasted where a secret
// does not belong: no line aokeyd prints may hold any of them, in any
// form the file gives them.
const (
	startSecretB64    = "YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhhLTdRdlg=" // aokeyd-test-secret-alpha-7QvX
	startSecretRaw    = "aokeyd-test-secret-alpha-7QvX"
	startOtherB64     = "YW9rZXlkLXRlc3Qtc2VjcmV0LWJyYXZvLTRLbVo=" // aokeyd-test-secret-bravo-4KmZ
	startOtherRaw     = "aokeyd-test-secret-bravo-4KmZ"
	startThirdB64     = "YW9rZXlkLXRlc3Qtc2VjcmV0LWNoYXJsaWUtOVB3" // aokeyd-test-secret-charlie-9Pw
	startThirdRaw     = "aokeyd-test-secret-charlie-9Pw"
	startPastedSecret = "aokeydTestPastedSecretStart4Jw8Kq2Zr"
)

// startKeyFile is a key file for the demo policy's chain: k1, good, and
// the text of the keys after it (each "      - name: ..." with its
// fields).
func startKeyFile(more string) string {
	return "chains:\n  demo:\n    peers: [192.0.2.2, \"2001:db8::2\"]\n    keys:\n" +
		"      - name: k1\n        send_id: 1\n        recv_id: 101\n        algorithm: hmac(sha256)\n" +
		"        secret_b64: \"" + startSecretB64 + "\"\n" + more
}

// k2 is a second key whose fields are the good ones with edit applied
// (old, new); a new of "" drops the line.
func k2(edit ...string) string {
	s := "      - name: k2\n        send_id: 2\n        recv_id: 102\n        algorithm: hmac(sha256)\n" +
		"        secret_b64: \"" + startOtherB64 + "\"\n"
	for i := 0; i+1 < len(edit); i += 2 {
		if !strings.Contains(s, edit[i]) {
			panic("k2 has no " + edit[i])
		}
		s = strings.Replace(s, edit[i], edit[i+1], 1)
	}
	return s
}

// TestStartRefusesWhatValidateRefusesInTheKeys: for each key file that
// `aoctl validate` refuses (config.Check with the key source, the
// function validate calls; the kernel's algorithms the test's), aokeyd exits with status 1 before READY=1
// and before it creates its state directory, its stderr carries every
// problem in the line validate prints (keystore.ReportOf), and no secret
// of the file, nor the one pasted into the wrong field. Before, aokeyd
// checked the configuration and the policy only (config.Check with
// SkipKeySource): it started on each of these files, sent READY=1, and
// left the rejected key to a log line and aoctl status.
func TestStartRefusesWhatValidateRefusesInTheKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keys    string      // the key file; "" leaves none
		mode    os.FileMode // of the key file; 0: 0600
		policy  string      // replaces the demo policy when set
		refuse  string      // an algorithm this machine's kernel refuses
		problem string      // in one of validate's problems
	}{
		{name: "secret_b46 typo", keys: startKeyFile(k2("secret_b64", "secret_b46")), problem: "unknown field"},
		{name: "send_id 256", keys: startKeyFile(k2("send_id: 2", "send_id: 256")), problem: "chains.demo.keys[1].send_id"},
		{name: "unknown field in the chain", keys: strings.Replace(startKeyFile(k2()), "    keys:\n", "    kyes: []\n    keys:\n", 1),
			problem: "unknown field"},
		{name: "send lifetime ends before it starts",
			keys:    startKeyFile(k2("algorithm: hmac(sha256)\n", "algorithm: hmac(sha256)\n        send_lifetime: {start: \"2030-01-01T00:00:00Z\", end: \"2029-01-01T00:00:00Z\"}\n")),
			problem: "send_lifetime"},
		{name: "secret pasted into recv_id", keys: startKeyFile(k2("recv_id: 102", "recv_id: "+startPastedSecret)),
			problem: "chains.demo.keys[1].recv_id"},
		{name: "secret pasted into a key's name", keys: startKeyFile(k2("name: k2", "name: "+startPastedSecret)),
			problem: "chains.demo.keys[1].name"},
		{name: "YAML syntax", keys: strings.Replace(startKeyFile(""), `"2001:db8::2"]`, `"2001:db8::2"`, 1), problem: "keys.yaml:"},
		{name: "readable by others", keys: startKeyFile(""), mode: 0o644, problem: "chmod 600"},
		{name: "no key file", problem: "keys.yaml"},
		{name: "duplicate IDs", keys: startKeyFile(k2("send_id: 2", "send_id: 1")), problem: "send_id"},
		// A gap now (the only key's send lifetime has ended): refused. A
		// gap ahead is a warning (TestStartWarnsOfAGapAhead).
		{name: "no key to send with now",
			keys:    strings.Replace(startKeyFile(""), "        algorithm:", "        send_lifetime: {start: \"2020-01-01T00:00:00Z\", end: \"2021-01-01T00:00:00Z\"}\n        algorithm:", 1),
			problem: "no key"},
		{name: "the policy's chain is not in the keys",
			keys:   startKeyFile(""),
			policy: "version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 192.0.2.2\n    key_chain: core\n", problem: "core"},
		{name: "an algorithm the kernel refuses", keys: startKeyFile(""), refuse: "hmac(sha256)", problem: "the test's kernel refuses it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := initTestConfig(t, dir)
			keysPath := filepath.Join(dir, "keys.yaml")
			if err := os.Remove(keysPath); err != nil {
				t.Fatal(err)
			}
			if tc.keys != "" {
				if err := os.WriteFile(keysPath, []byte(tc.keys), 0o600); err != nil {
					t.Fatal(err)
				}
				if tc.mode != 0 {
					if err := os.Chmod(keysPath, tc.mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.policy != "" {
				if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(tc.policy), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			// validate asks this machine's kernel; the child's is the
			// test's (startCheckChild).
			o := config.CheckOptions{Algorithms: func() (map[tcpao.Algorithm]error, string) {
				return refusedAlgorithms(tc.refuse), tcpao.KernelRelease()
			}}
			lines := validateLines(t, cfgPath, tc.problem, o)
			stderr, msgs, err := runStartCheck(t, cfgPath, filepath.Join(dir, "state"), refusedAlgEnv+"="+tc.refuse)
			assertRefused(t, stderr, msgs, err, lines)
			if _, err := os.Lstat(filepath.Join(dir, "state")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state directory: %v, want it not created by a refused start", err)
			}
		})
	}
}

// validateLines are the problems `aoctl validate` prints for the
// configuration at cfgPath (config.Check with o), one line each
// (keystore.ReportOf, what validate prints); one of them must say want,
// or the test's files are not the ones meant.
func validateLines(t *testing.T, cfgPath, want string, o config.CheckOptions) []string {
	t.Helper()
	ch := config.Check(context.Background(), cfgPath, o)
	ch.Snapshot.Zero()
	var lines []string
	for _, p := range ch.Problems {
		lines = append(lines, keystore.ReportOf(p).String())
	}
	if !strings.Contains(strings.Join(lines, "\n"), want) {
		t.Fatalf("validate's problems %q: none says %q (the test's files are not the ones meant)", lines, want)
	}
	return lines
}

// runStartCheck runs aokeyd's start (the start-check child: the kernel
// probe and the process hardening passed) until it exits or says READY=1.
func runStartCheck(t *testing.T, cfgPath, stateDir string, env ...string) (string, []string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$", "-config", cfgPath, "-state-dir", stateDir)
	cmd.Env = append(append(os.Environ(), testChildEnv+"=start-check"), env...)
	return runUntilExit(t, cmd)
}

// assertRefused: aokeyd exited with status 1 without READY=1, its stderr
// holds each of validate's lines, and no secret of the tests.
func assertRefused(t *testing.T, stderr string, msgs []string, err error, lines []string) {
	t.Helper()
	for _, m := range msgs {
		if strings.Contains(m, "READY=1") {
			t.Errorf("aokeyd sent %q to NOTIFY_SOCKET with keys validate refuses", m)
		}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("aokeyd exit: %v, want exit status 1", err)
	}
	// A gap's "from now until now plus the window" is the moment of each
	// check: validate's and the start's, a second apart across a second's
	// boundary. The lines are compared with their times out.
	got := stampRE.ReplaceAllString(stderr, "TIME")
	for _, l := range lines {
		if !strings.Contains(got, stampRE.ReplaceAllString(l, "TIME")+"\n") {
			t.Errorf("aokeyd stderr lacks validate's line %q; stderr:\n%s", l, redactTestSecrets(stderr))
		}
	}
	noTestSecret(t, stderr)
}

// stampRE is an RFC 3339 time to the second, as problems print them.
var stampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// testSecrets are the tests' secrets, in every form the files give them.
var testSecrets = []string{startSecretB64, startSecretRaw, startOtherB64, startOtherRaw, startThirdB64, startThirdRaw, startPastedSecret}

// noTestSecret fails the test when s holds a secret of these tests, in
// any of its forms.
func noTestSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range testSecrets {
		if strings.Contains(s, secret) {
			t.Errorf("aokeyd's output holds a secret of the test:\n%s", redactTestSecrets(s))
		}
	}
}

// redactTestSecrets is s with the tests' secrets replaced: a failing
// test's log must not hold them either (CI greps the log for them).
func redactTestSecrets(s string) string {
	for _, secret := range testSecrets {
		s = strings.ReplaceAll(s, secret, "[TEST SECRET]")
	}
	return s
}

// TestStartWarnsOfAGapAhead: keys that cover the peer today but run out
// within validate's horizon are valid today. validate warns of the gap
// (exit 0), and aokeyd starts (READY=1) and logs the same warning: a
// refusal would leave a rebooted router's speakers unkeyed over a gap that
// is weeks away. (It was a refusal in both.)
func TestStartWarnsOfAGapAhead(t *testing.T) {
	soon := time.Now().UTC().Add(30 * 24 * time.Hour).Format(time.RFC3339)
	dir := t.TempDir()
	cfgPath := initTestConfig(t, dir)
	keys := strings.Replace(startKeyFile(""), "        algorithm:", "        send_lifetime: {start: \"2020-01-01T00:00:00Z\", end: \""+soon+"\"}\n        algorithm:", 1)
	if err := os.WriteFile(filepath.Join(dir, "keys.yaml"), []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	o := config.CheckOptions{Algorithms: func() (map[tcpao.Algorithm]error, string) {
		return refusedAlgorithms(""), tcpao.KernelRelease()
	}}
	ch := config.Check(context.Background(), cfgPath, o)
	ch.Snapshot.Zero()
	var gap []string
	for _, w := range ch.Warnings {
		if errors.Is(w, policy.ErrGapAhead) {
			gap = append(gap, w.Error())
		}
	}
	if !ch.OK() || len(gap) == 0 {
		t.Fatalf("validate: problems %v, warnings %v; want none and a gap ahead", ch.Problems, ch.Warnings)
	}
	logs, msgs, err := runStartCheck(t, cfgPath, filepath.Join(dir, "state"))
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "READY=1") }) {
		t.Fatalf("start refused keys that cover the peer today (%v):\n%s", err, logs)
	}
	for _, w := range gap {
		// The gap's end is the validation window's (now plus its
		// length, to the second): the start's check runs a moment
		// after validate's, so the warning is compared up to it.
		w, _, _ = strings.Cut(w, " until ")
		if q := strconv.Quote(w); !strings.Contains(logs, q[:len(q)-1]) && !strings.Contains(logs, w) {
			t.Errorf("start's log lacks validate's warning %q:\n%s", w, logs)
		}
	}
}
