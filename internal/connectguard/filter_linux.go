//go:build linux

package connectguard

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h): int nr;
// __u32 arch; __u64 instruction_pointer; __u64 args[6].
const (
	offNr   = 0
	offArch = 4
)

// arch is the audit architecture and the connect(2) and listen(2) numbers
// of this build. The filter only knows the native syscall ABI.
type arch struct {
	audit   uint32
	connect uint32
	listen  uint32
}

func nativeArch() (arch, error) {
	switch runtime.GOARCH {
	case "amd64":
		return arch{audit: unix.AUDIT_ARCH_X86_64, connect: unix.SYS_CONNECT, listen: unix.SYS_LISTEN}, nil
	case "arm64":
		return arch{audit: unix.AUDIT_ARCH_AARCH64, connect: unix.SYS_CONNECT, listen: unix.SYS_LISTEN}, nil
	}
	return arch{}, fmt.Errorf("%w: GOARCH %s", ErrUnsupported, runtime.GOARCH)
}

// program is the classic-BPF filter: connect(2) and listen(2) of the
// native ABI go to the user-notification listener, every other syscall
// (and every syscall of a foreign ABI: i386 or x32 on amd64, which a Go
// program never uses) is allowed. The filter never denies anything. A
// filter sees only the syscall's number and arguments, never the port a
// listen's socket is bound to: every listen goes to the supervisor, which
// reads the port from the socket itself.
func program(a arch) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.audit, SkipTrue: 3}, // -> allow
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.connect, SkipTrue: 2}, // -> notify
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.listen, SkipTrue: 1},  // -> notify
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF},
	}
}

// installFilter sets no_new_privs and installs the filter on the calling
// thread with SECCOMP_FILTER_FLAG_NEW_LISTENER, returning the listener fd
// (O_CLOEXEC). The caller has locked its goroutine to the thread, and that
// thread must be the one that execs the program: a filter installed on
// another thread is not inherited (no TSYNC on purpose: the Go runtime's
// other threads die at exec anyway).
func installFilter() (int, error) {
	a, err := nativeArch()
	if err != nil {
		return -1, err
	}
	raw, err := bpf.Assemble(program(a))
	if err != nil {
		return -1, fmt.Errorf("assemble seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return -1, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): %w", errno)
	}
	return int(fd), nil
}
