//go:build linux

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// harden keeps key material out of other processes' reach before any key
// is read:
//
//   - PR_SET_DUMPABLE 0: /proc/PID/mem, /proc/PID/maps, ptrace and
//     process_vm_readv then need CAP_SYS_PTRACE, so a process of the same
//     uid (the README runs aokeyd as the BGP daemon's uid) cannot read the
//     keys from memory; the kernel also writes no core dump of a
//     non-dumpable process (fs.suid_dumpable 0) or a root-only one (2).
//   - RLIMIT_CORE 0 (soft and hard): no core file either way, whatever
//     fs.suid_dumpable says.
//
// Both are per process and do not survive into the BGP daemon that `aokeyd
// exec` starts (that path never calls harden).
//
// Key buffers are not also put in mmap'd MADV_DONTDUMP+mlock'd pages:
// tcpao.Secret is a value type whose copies share one slice and which has no
// free, only Zero, so pages outside the Go heap would need a pointer-held
// handle with a runtime cleanup, and a caller still holding Bytes() after
// the last Secret copy dropped would read a slot already reused for another
// key. Within the heap, a Secret's buffer is wiped once nothing refers to it
// (tcpao.NewSecret), and the key decoders keep a secret's text out of the
// YAML and JSON decoders' strings and buffers (keystore's secretText); the
// HTTP and TLS buffers of a Vault response remain, which such pages would
// not cover either. The two settings above cover the whole process instead:
// no core dump at all, no same-uid reader. What they leave is swap (mlock's
// part), for which the host's swap, if any, should be encrypted.
func harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("process hardening: %w", os.NewSyscallError("prctl(PR_SET_DUMPABLE)", err))
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("process hardening: %w", os.NewSyscallError("setrlimit(RLIMIT_CORE)", err))
	}
	return nil
}
