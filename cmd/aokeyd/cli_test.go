package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errDaemonStarted is what the stand-in process hardening returns: the
// command line got as far as starting the daemon.
var errDaemonStarted = errors.New("test: the daemon was started")

// TestCommandLine: help, version and every argument aokeyd does not know
// are answered without starting the daemon (the process hardening, its
// first step, is swapped for a recorder here). `aokeyd status` and
// `aokeyd completion bash` used to start the daemon with the default
// configuration; `aokeyd --help` exited 2 with flags only; --version was
// an unknown flag.
func TestCommandLine(t *testing.T) {
	started := false
	h := systemHost()
	h.harden = func() error { started = true; return errDaemonStarted }

	var subcommands []string
	for _, c := range manTree().Commands() {
		subcommands = append(subcommands, c.Name())
	}
	var daemonFlagNames []string
	dfs, _ := daemonFlags()
	dfs.VisitAll(func(f *flag.Flag) { daemonFlagNames = append(daemonFlagNames, "-"+f.Name) })
	var initFlagNames []string
	ifs, _ := initFlags()
	ifs.VisitAll(func(f *flag.Flag) { initFlagNames = append(initFlagNames, "-"+f.Name) })
	usage := append(append([]string{"Usage:"}, subcommands...), daemonFlagNames...)

	for _, tc := range []struct {
		args   []string
		code   int
		daemon bool     // the daemon is started
		stdout []string // each in stdout (nil: stdout empty)
		stderr []string // each in stderr (nil: stderr empty)
	}{
		{args: nil, code: 1, daemon: true, stderr: []string{errDaemonStarted.Error()}},
		{args: []string{"-config", "x.yaml"}, code: 1, daemon: true, stderr: []string{errDaemonStarted.Error()}},
		{args: []string{"help"}, stdout: usage},
		{args: []string{"--help"}, stdout: usage},
		{args: []string{"-h"}, stdout: usage},
		{args: []string{"-help"}, stdout: usage},
		{args: []string{"version"}, stdout: []string{"aokeyd " + version + "\n"}},
		{args: []string{"--version"}, stdout: []string{"aokeyd " + version + "\n"}},
		{args: []string{"-version"}, stdout: []string{"aokeyd " + version + "\n"}},
		{args: []string{"status"}, code: 2, stderr: []string{`unknown command "status"`, "aokeyd help"}},
		{args: []string{"completion", "bash"}, code: 2, stderr: []string{`unknown command "completion"`}},
		{args: []string{"-config", "x.yaml", "run"}, code: 2, stderr: []string{`unexpected argument "run"`}},
		{args: []string{"--frobnicate"}, code: 2, stderr: []string{"-frobnicate", "aokeyd help"}},
		{args: []string{"version", "extra"}, code: 2, stderr: []string{`unexpected argument "extra"`}},
		{args: []string{"help", "extra"}, code: 2, stderr: []string{`unexpected argument "extra"`}},
		{args: []string{"init", "-h"}, stdout: initFlagNames},
		{args: []string{"init", "--help"}, stdout: initFlagNames},
		{args: []string{"exec", "--help"}, stdout: []string{"-socket", "PROGRAM"}},
	} {
		t.Run(strings.Join(append([]string{"aokeyd"}, tc.args...), " "), func(t *testing.T) {
			started = false
			var stdout, stderr bytes.Buffer
			code := h.run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%sstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if started != tc.daemon {
				t.Errorf("daemon started: %v, want %v", started, tc.daemon)
			}
			for _, s := range []struct {
				name string
				got  string
				want []string
			}{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
				if s.want == nil && s.got != "" {
					t.Errorf("%s: %q, want nothing", s.name, s.got)
				}
				for _, w := range s.want {
					if !strings.Contains(s.got, w) {
						t.Errorf("%s lacks %q:\n%s", s.name, w, s.got)
					}
				}
			}
		})
	}
}

// TestNothingWrittenBeforeTheChecks: a start refused by the kernel check
// writes nothing: no state directory, no fingerprint key (the
// configuration check's refusals: TestStartRefusesWhatValidateRefuses).
func TestNothingWrittenBeforeTheChecks(t *testing.T) {
	h := systemHost()
	h.harden = func() error { return nil }
	h.probeKernel = func() error { return errors.New("test: no TCP-AO here") }
	dir := t.TempDir()
	cfgPath := initTestConfig(t, dir)
	stateDir := filepath.Join(dir, "state")
	var stderr bytes.Buffer
	if code := h.run([]string{"-config", cfgPath, "-state-dir", stateDir}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no TCP-AO here") {
		t.Errorf("stderr %q does not carry the kernel check's error", stderr.String())
	}
	if _, err := os.Lstat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory %s: %v, want it not created by a start the kernel check refused", stateDir, err)
	}
}
