package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// aokeydBinary builds this command once per test binary run.
func aokeydBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "aokeyd-bin-"); buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", buildDir, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return filepath.Join(buildDir, "aokeyd")
}

// testChildren are the roles this test binary runs as a child process,
// chosen by $AOKEYD_TEST_CHILD.
var testChildren = map[string]func() int{}

const testChildEnv = "AOKEYD_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(hardenRoleEnv); role != "" {
		os.Exit(hardenChild(role))
	}
	if role := os.Getenv(testChildEnv); role != "" {
		os.Exit(testChildren[role]())
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestNoTCPAOKernelExitsBeforeReady: on a kernel built without
// CONFIG_TCP_AO (this host's), aokeyd with an otherwise valid configuration
// exits non-zero with one line naming CONFIG_TCP_AO and the README section,
// and never tells systemd it is ready.
func TestNoTCPAOKernelExitsBeforeReady(t *testing.T) {
	if err := tcpao.Probe(); !errors.Is(err, tcpao.ErrNoKernelSupport) {
		t.Skipf("needs a kernel without CONFIG_TCP_AO (the host's); this one probes %v", err)
	}
	bin := aokeydBinary(t)
	dir := t.TempDir()
	cfgPath := initTestConfig(t, dir)
	stderr, msgs, err := runUntilExit(t, exec.Command(bin, "-config", cfgPath, "-state-dir", dir))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("aokeyd exit: %v, want a non-zero exit status", err)
	}
	for _, m := range msgs {
		if strings.Contains(m, "READY=1") {
			t.Errorf("aokeyd sent %q to NOTIFY_SOCKET on a kernel without TCP-AO", m)
		}
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "CONFIG_TCP_AO") || !strings.Contains(lines[0], "Kernel requirements") {
		t.Errorf("aokeyd stderr %q: want one line naming CONFIG_TCP_AO and the README section", stderr)
	}
	t.Logf("aokeyd: %v: %s", err, lines[0])
}

// runUntilExit runs cmd (an aokeyd) with a NOTIFY_SOCKET of its own until
// it exits, or until it says READY=1 (then it is killed: every caller
// wants it to exit before that), and fails the test if it does neither
// within 20s. It returns its stderr, what it sent to NOTIFY_SOCKET and how
// it ended.
func runUntilExit(t *testing.T, cmd *exec.Cmd) (stderr string, msgs []string, err error) {
	t.Helper()
	notifyPath := filepath.Join(t.TempDir(), "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got, ready := make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(got)
		buf := make([]byte, 4096)
		for {
			n, err := nc.Read(buf)
			if err != nil {
				return
			}
			msgs = append(msgs, string(buf[:n]))
			if strings.Contains(string(buf[:n]), "READY=1") {
				select {
				case ready <- struct{}{}:
				default:
				}
			}
		}
	}()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notifyPath)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ready:
		_ = cmd.Process.Kill()
		err = <-done
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		nc.Close()
		<-got
		t.Fatalf("aokeyd still running after 20s, not ready; notify messages %q; stderr:\n%s", msgs, errBuf.String())
	}
	nc.Close()
	<-got
	return errBuf.String(), msgs, err
}

// initTestConfig writes `aokeyd init`'s configuration into dir with the
// control socket in dir and metrics on a free loopback port, so that a test
// daemon touches nothing of the machine's; it returns the config's path.
func initTestConfig(t *testing.T, dir string) string {
	t.Helper()
	var out bytes.Buffer
	if code := run([]string{"init", "-dir", dir}, &out, &out); code != 0 {
		t.Fatalf("aokeyd init: %d\n%s", code, out.String())
	}
	cfgPath := filepath.Join(dir, "aokeyd.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte("/run/aokeyd/control.sock"), []byte(filepath.Join(dir, "control.sock")))
	cfg = bytes.ReplaceAll(cfg, []byte("127.0.0.1:9179"), []byte("127.0.0.1:0"))
	if err := os.WriteFile(cfgPath, cfg, 0o640); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}
