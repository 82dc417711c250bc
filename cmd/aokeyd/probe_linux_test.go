//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The probe test runs aokeyd (this test binary, as a child) under a real
// seccomp filter that denies the kernel probe, as a restrictive profile
// would: $AOKEYD_TEST_PROBE_DENY names what it denies.
const probeDenyEnv = "AOKEYD_TEST_PROBE_DENY"

// seccompUnavailable is what the child prints when it cannot install its
// filter (the parent then skips).
const seccompUnavailable = "seccomp unavailable: "

func init() { testChildren["probe-denied"] = probeDeniedChild }

// probeDeniedChild installs the filter on every thread, then runs aokeyd's
// real start-up with the arguments after the test binary's own.
func probeDeniedChild() int {
	prog, err := denyProgram(os.Getenv(probeDenyEnv))
	if err == nil {
		err = installProcessFilter(prog)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, seccompUnavailable+err.Error())
		return 3
	}
	args := os.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-test.") {
		args = args[1:]
	}
	return run(args, os.Stdout, os.Stderr)
}

// Offsets in struct seccomp_data: int nr; __u32 arch; __u64
// instruction_pointer; __u64 args[6] (the low half of each first: amd64
// and arm64 are little-endian).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
)

// denyProgram is a filter that allows everything but one thing:
//   - "getsockopt-eperm": getsockopt(fd, SOL_TCP, TCP_AO_INFO) fails with
//     EPERM (a seccomp profile: systemd's SystemCallFilter=);
//   - "socket-eacces": socket(AF_INET or AF_INET6, ...) fails with EACCES
//     (an LSM that denies aokeyd TCP sockets).
func denyProgram(what string) ([]bpf.Instruction, error) {
	var audit uint32
	switch runtime.GOARCH {
	case "amd64":
		audit = unix.AUDIT_ARCH_X86_64
	case "arm64":
		audit = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("GOARCH %s", runtime.GOARCH)
	}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	deny := func(errno unix.Errno) bpf.RetConstant {
		return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(errno)}
	}
	// Each program: check the arch, the syscall, two arguments (or one
	// argument against two values), then deny; any mismatch allows.
	head := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: audit, SkipTrue: 0}, // patched below
		bpf.LoadAbsolute{Off: seccompNr, Size: 4},
	}
	var body []bpf.Instruction
	switch what {
	case "getsockopt-eperm":
		body = []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_GETSOCKOPT, SkipTrue: 5},
			bpf.LoadAbsolute{Off: seccompArg0 + 8*1, Size: 4}, // level
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SOL_TCP, SkipTrue: 3},
			bpf.LoadAbsolute{Off: seccompArg0 + 8*2, Size: 4}, // optname
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 40 /* TCP_AO_INFO */, SkipTrue: 1},
			deny(unix.EPERM),
		}
	case "socket-eacces":
		body = []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_SOCKET, SkipTrue: 4},
			bpf.LoadAbsolute{Off: seccompArg0, Size: 4}, // domain
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_INET6, SkipTrue: 1},
			deny(unix.EACCES),
		}
	default:
		return nil, fmt.Errorf("unknown denial %q", what)
	}
	head[1] = bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: audit, SkipTrue: uint8(len(body) + 1)}
	return append(append(head, body...), allow), nil
}

// installProcessFilter sets no_new_privs and installs prog on every thread
// of the process (TSYNC): the probe may run on any of them.
func installProcessFilter(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	return nil
}

// TestProbeDeniedExitsBeforeReady: when the kernel probe fails for a
// reason other than a kernel without TCP-AO (a seccomp profile or an LSM
// denying aokeyd its scratch TCP socket), aokeyd fails closed: it exits
// with status 1 before READY=1, with one line that names the failed call
// and its error and says what to check. It used to log "starting anyway"
// and go on to READY.
func TestProbeDeniedExitsBeforeReady(t *testing.T) {
	for _, tc := range []struct {
		deny string
		want []string // in the one line, besides what every row wants
	}{
		{"getsockopt-eperm", []string{"getsockopt(TCP_AO_INFO): operation not permitted"}},
		{"socket-eacces", []string{"socket: permission denied"}},
	} {
		t.Run(tc.deny, func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfgPath := initTestConfig(t, dir)
			cmd := exec.Command(self, "-test.run=^$", "-config", cfgPath, "-state-dir", dir)
			cmd.Env = append(os.Environ(), testChildEnv+"=probe-denied", probeDenyEnv+"="+tc.deny)
			stderr, msgs, err := runUntilExit(t, cmd)
			if strings.Contains(stderr, seccompUnavailable) {
				t.Skip(strings.TrimSpace(stderr))
			}
			for _, m := range msgs {
				if strings.Contains(m, "READY=1") {
					t.Errorf("aokeyd sent %q to NOTIFY_SOCKET with its kernel probe denied", m)
				}
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("aokeyd exit: %v, want exit status 1", err)
			}
			var missing []string
			for _, want := range append(tc.want, "aokeyd: ", "TCP-AO", "seccomp", "SystemCallFilter=", "LSM",
				"AppArmor", "SELinux", "capabilities", "Kernel requirements") {
				if !strings.Contains(stderr, want) {
					missing = append(missing, want)
				}
			}
			if n := strings.Count(strings.TrimRight(stderr, "\n"), "\n"); n != 0 || len(missing) > 0 {
				t.Errorf("aokeyd stderr %q: want one line, lacking none of %q", stderr, missing)
			}
			if strings.Contains(stderr, "CONFIG_TCP_AO") {
				t.Errorf("aokeyd stderr %q blames the kernel build for a denied probe", stderr)
			}
			t.Logf("aokeyd: %v: %s", err, stderr)
		})
	}
}
