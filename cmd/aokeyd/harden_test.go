package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// The hardening test re-executes this test binary in two roles, both as an
// unprivileged uid: "reader" starts "target" (so the reader is the target's
// parent, which even Yama's ptrace_scope=1 allows), waits until the target's
// aokeyd has started, then tries to read the target's memory through
// /proc/PID/mem and prints what happened.
const (
	hardenRoleEnv = "AOKEYD_TEST_HARDEN_ROLE"
	hardenSkipEnv = "AOKEYD_TEST_HARDEN_SKIP" // "1": the target runs without harden (the control case)
	hardenCfgEnv  = "AOKEYD_TEST_HARDEN_CONFIG"
	nobody        = 65534
)

func hardenChild(role string) int {
	switch role {
	case "target":
		return hardenTarget()
	case "reader":
		return hardenReader()
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// hardenTarget runs aokeyd's own serve path (its real start-up: harden,
// configuration, key source, control socket) with only the kernel probes
// passed (TCP-AO, and every algorithm accepted), since this host has no
// TCP-AO; it keeps running until killed.
func hardenTarget() int {
	h := systemHost()
	h.probeKernel = func() error { return nil }
	h.probeAlgorithms = func() map[tcpao.Algorithm]error { return nil }
	if os.Getenv(hardenSkipEnv) == "1" {
		h.harden = func() error { return nil }
	}
	cfg := os.Getenv(hardenCfgEnv)
	return h.run([]string{"-config", cfg, "-state-dir", filepath.Dir(cfg)}, os.Stdout, os.Stderr)
}

func hardenReader() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	t := exec.Command(self)
	t.Env = append(os.Environ(), hardenRoleEnv+"=target")
	// Same uid as this reader, set explicitly (no supplementary groups: an
	// unprivileged process may not set them).
	t.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
		Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), NoSetGroups: true}}
	logs, err := t.StderrPipe()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := t.Start(); err != nil {
		fmt.Println("error: start target:", err)
		return 1
	}
	defer func() { _ = t.Process.Kill(); _ = t.Wait() }()
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "aokeyd started") {
				ok = true
				started <- true
			}
		}
		if !ok {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			fmt.Println("error: target exited before it started")
			return 1
		}
	case <-time.After(20 * time.Second):
		fmt.Println("error: target did not start")
		return 1
	}
	pid := t.Process.Pid
	if err := t.Process.Signal(syscall.Signal(0)); err != nil {
		fmt.Println("error: target gone:", err)
		return 1
	}
	fmt.Printf("uids reader=%d target=%s\n", os.Getuid(), procUID(pid))
	fmt.Println("mem:", readMem(pid))
	fmt.Println("core:", coreLimit(pid))
	return 0
}

// readMem opens /proc/PID/mem and reads 16 bytes from pid's first
// readable mapping.
func readMem(pid int) string {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return "refused: " + err.Error()
	}
	defer mem.Close()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return "refused: " + err.Error()
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		start, err := strconv.ParseUint(strings.SplitN(f[0], "-", 2)[0], 16, 64)
		if err != nil {
			continue
		}
		buf := make([]byte, 16)
		if _, err := mem.ReadAt(buf, int64(start)); err != nil {
			return "refused: " + err.Error()
		}
		return "read"
	}
	return "refused: no readable mapping"
}

// coreLimit is pid's RLIMIT_CORE as "soft hard" (/proc/PID/limits).
func coreLimit(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(l, "Max core file size")); len(f) >= 2 && strings.HasPrefix(l, "Max core file size") {
			return f[0] + " " + f[1]
		}
	}
	return "?"
}

func procUID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Uid:") {
			return strings.Fields(l)[1]
		}
	}
	return "?"
}

// TestSameUIDCannotReadKeyMemory: aokeyd's memory, which holds the keys,
// is not readable through /proc/PID/mem by another process of its uid once
// it has started; the same reader does read it when the hardening is left
// out, so the test can tell.
func TestSameUIDCannotReadKeyMemory(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the target and the reader as another uid")
	}
	// A directory the unprivileged uid owns: a copy of this test binary,
	// aokeyd's configuration, keys, state and control socket.
	dir, err := os.MkdirTemp("", "aokeyd-harden-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "aokeyd.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cfgPath := initTestConfig(t, dir)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		skip     string
		wantRead bool
	}{
		{"hardened", "0", false},
		{"without hardening", "1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r := exec.CommandContext(ctx, bin, "-test.run=^$")
			r.Env = append(os.Environ(), hardenRoleEnv+"=reader", hardenSkipEnv+"="+tc.skip, hardenCfgEnv+"="+cfgPath, "HOME="+dir)
			r.Dir = dir
			r.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			got, err := r.Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("reader: %v\n%s\n%s", err, got, ee.Stderr)
				}
				t.Fatalf("reader: %v\n%s", err, got)
			}
			text := string(got)
			t.Logf("reader says:\n%s", text)
			if !strings.Contains(text, fmt.Sprintf("uids reader=%d target=%d", nobody, nobody)) {
				t.Fatalf("reader and target do not share uid %d:\n%s", nobody, text)
			}
			read := strings.Contains(text, "mem: read")
			if read != tc.wantRead {
				t.Errorf("same-uid read of /proc/PID/mem succeeded=%v, want %v:\n%s", read, tc.wantRead, text)
			}
			if !tc.wantRead && !strings.Contains(text, "permission denied") {
				t.Errorf("want the open refused with EACCES:\n%s", text)
			}
			if core := strings.Contains(text, "core: 0 0\n"); core == tc.wantRead {
				t.Errorf("RLIMIT_CORE 0 (soft and hard) = %v, want %v:\n%s", core, !tc.wantRead, text)
			}
		})
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
