package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The start-check child runs aokeyd's real start-up (run, as main does)
// with the process hardening and the kernel probe passed, and every
// TCP-AO algorithm accepted but those $AOKEYD_TEST_REFUSED_ALG names
// (refusedAlgorithms), so that what it refuses or accepts is the
// configuration and the keys alone.
func init() { testChildren["start-check"] = startCheckChild }

const refusedAlgEnv = "AOKEYD_TEST_REFUSED_ALG"

func startCheckChild() int {
	h := acceptingHost()
	h.probeAlgorithms = func() map[tcpao.Algorithm]error { return refusedAlgorithms(os.Getenv(refusedAlgEnv)) }
	args := os.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-test.") {
		args = args[1:]
	}
	return h.run(args, os.Stdout, os.Stderr)
}

// TestStartRefusesWhatValidateRefuses: for each configuration that
// `aoctl validate --no-keys --no-kernel` refuses (config.Check without the
// key source, the function validate calls), aokeyd exits with status 1
// before READY=1 and before it creates its state directory, and its
// stderr carries every problem validate prints, word for word. It used to
// start with only a "configuration problem" log line for the problems
// found after the policy loaded (BIRD bindings, VRF twins, control group).
func TestStartRefusesWhatValidateRefuses(t *testing.T) {
	// BIRD replaces gobgpd: the init config's gobgp section goes (KEYS: a
	// scratch directory that a refused start must not create).
	bird := [][2]string{{"gobgp:\n  address: 127.0.0.1:50051\n  process_name: gobgpd\n",
		"speaker:\n  type: bird\n  bird:\n    keys_dir: KEYS\n    control_socket: KEYS/bird.ctl\n"}}
	for _, tc := range []struct {
		name    string
		edits   [][2]string // replacements in `aokeyd init`'s config
		policy  string      // peers of the demo chain, replacing the demo policy's
		problem string      // in one of validate's problems
	}{
		{"bird vrf", bird, "  - neighbor: 192.0.2.2\n    vrf: red\n    key_chain: demo\n",
			"with speaker type bird aokeyd keys default-VRF neighbors only"},
		{"bird prefix", bird, "  - neighbor: 192.0.2.0/24\n    key_chain: demo\n",
			"is a prefix: with speaker type bird"},
		{"bird include_tcp_options false", bird, "  - neighbor: 192.0.2.2\n    key_chain: demo\n    include_tcp_options: false\n",
			"BIRD has no setting to exclude TCP options"},
		{"gobgp vrf twins", nil, "  - neighbor: 192.0.2.2\n    key_chain: demo\n  - neighbor: 192.0.2.2\n    vrf: red\n    key_chain: demo\n",
			"keys its neighbors by address alone"},
		{"unknown control group", [][2]string{{"control:\n", "control:\n  group: aokeyd-test-no-such-group\n"}},
			"  - neighbor: 192.0.2.2\n    key_chain: demo\n", "control.group"},
		{"policy without key_chain", nil, "  - neighbor: 192.0.2.2\n", "key_chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := initTestConfig(t, dir)
			keys := filepath.Join(dir, "bird")
			for _, e := range tc.edits {
				replaceInFile(t, cfgPath, e[0], strings.ReplaceAll(e[1], "KEYS", keys))
			}
			pol := "version: 1\nkey_chains:\n  - name: demo\npeers:\n" + tc.policy
			if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o640); err != nil {
				t.Fatal(err)
			}

			// What aoctl validate --no-keys prints: one line per problem.
			ch := config.Check(context.Background(), cfgPath, config.CheckOptions{SkipKeySource: true})
			var lines []string
			for _, p := range ch.Problems {
				lines = append(lines, p.Error())
			}
			if !strings.Contains(strings.Join(lines, "\n"), tc.problem) {
				t.Fatalf("validate's problems %q: none says %q (the table's configuration is not the one meant)", lines, tc.problem)
			}

			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			stateDir := filepath.Join(dir, "state")
			cmd := exec.Command(self, "-test.run=^$", "-config", cfgPath, "-state-dir", stateDir)
			cmd.Env = append(os.Environ(), testChildEnv+"=start-check")
			stderr, msgs, err := runUntilExit(t, cmd)
			for _, m := range msgs {
				if strings.Contains(m, "READY=1") {
					t.Errorf("aokeyd sent %q to NOTIFY_SOCKET with a configuration validate refuses", m)
				}
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("aokeyd exit: %v, want exit status 1", err)
			}
			for _, l := range lines {
				if !strings.Contains(stderr, l) {
					t.Errorf("aokeyd stderr lacks validate's problem %q; stderr:\n%s", l, stderr)
				}
			}
			if _, err := os.Lstat(stateDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state directory %s: %v, want it not created by a refused start", stateDir, err)
			}
			if _, err := os.Lstat(keys); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("BIRD keys directory %s: %v, want it not created by a refused start", keys, err)
			}
		})
	}
}

func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o640); err != nil {
		t.Fatal(err)
	}
}

// refusedAlgorithms is what the start-check child's kernel answers: alg
// refused (none when ""), every other algorithm accepted.
func refusedAlgorithms(alg string) map[tcpao.Algorithm]error {
	if alg == "" {
		return nil
	}
	return map[tcpao.Algorithm]error{tcpao.Algorithm(alg): errors.New("the test's kernel refuses it")}
}

// TestStartWarnsWhatValidateWarns: a policy binding whose vrf: names no
// VRF device on this machine passes aokeyd's start as it passes aoctl
// validate, and the start logs validate's warning word for word (it would
// never match a session). The start used to say nothing of it.
func TestStartWarnsWhatValidateWarns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VRF devices are Linux's")
	}
	for _, tc := range []struct {
		name   string
		policy string
		warn   bool
	}{
		{"default vrf", "  - neighbor: 192.0.2.2\n    key_chain: demo\n", false},
		{"vrf without a device", "  - neighbor: 192.0.2.2\n    vrf: aokeyd-nonevrf\n    key_chain: demo\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := initTestConfig(t, dir)
			pol := "version: 1\nkey_chains:\n  - name: demo\npeers:\n" + tc.policy
			if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o640); err != nil {
				t.Fatal(err)
			}
			ch := config.Check(context.Background(), cfgPath, config.CheckOptions{SkipKeySource: true, VRFDevice: config.LocalVRF})
			if !ch.OK() || (len(ch.Warnings) == 1) != tc.warn {
				t.Fatalf("validate: problems %v, warnings %v; want none and %v", ch.Problems, ch.Warnings, tc.warn)
			}
			// The start runs in a child: it sets the process's
			// fingerprint key, once per process.
			logs, msgs, err := runStartCheck(t, cfgPath, filepath.Join(dir, "state"))
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "READY=1") }) {
				t.Fatalf("start refused (%v):\n%s", err, logs)
			}
			got := strings.Contains(logs, "no VRF device")
			if got != tc.warn {
				t.Errorf("start logs a VRF warning: %v, want %v:\n%s", got, tc.warn, logs)
			}
			for _, w := range ch.Warnings {
				if !strings.Contains(logs, strconv.Quote(w.Error())) && !strings.Contains(logs, w.Error()) {
					t.Errorf("start's log lacks validate's warning %q:\n%s", w, logs)
				}
			}
		})
	}
}
