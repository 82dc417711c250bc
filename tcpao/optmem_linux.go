//go:build linux

package tcpao

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// RaiseOptMemIn makes net.core.optmem_max at least want in the network
// namespace of process pid (the BGP speaker: in the kernels aokeyd runs on,
// 6.12 checked, the limit is per network namespace, a new namespace starts
// at 128 KiB whatever the initial one says, and TCP-AO charges a socket's
// keys against its own namespace's value). It never lowers the value, and
// returns it before and after.
//
// When pid shares this process's namespace the sysctl is written directly;
// otherwise a locked OS thread enters pid's namespace with setns(2) (which
// needs CAP_SYS_ADMIN), writes /proc/sys there (sysctl files resolve the
// namespace of the thread that opens them) and goes back; a thread that
// cannot go back is retired with its goroutine.
func RaiseOptMemIn(pid, want int) (before, after int, err error) {
	type result struct {
		before, after int
		err           error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() { ch <- r }()
		runtime.LockOSThread()
		restored := true
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			r.err = fmt.Errorf("tcpao: speaker's network namespace: %w", err)
			return
		}
		defer target.Close()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			r.err = fmt.Errorf("tcpao: own network namespace: %w", err)
			return
		}
		defer self.Close()
		same, err := sameFile(target, self)
		if err != nil {
			r.err = err
			return
		}
		if !same {
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				r.err = fmt.Errorf("tcpao: enter the network namespace of pid %d: %w", pid, os.NewSyscallError("setns", err))
				return
			}
			defer func() {
				if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
					restored = false // the thread dies with this goroutine
					if r.err == nil {
						r.err = fmt.Errorf("tcpao: leave the network namespace of pid %d: %w", pid, os.NewSyscallError("setns", err))
					}
				}
			}()
		}
		r.before, r.after, r.err = raiseOptMem(want)
	}()
	r := <-ch
	return r.before, r.after, r.err
}

// raiseOptMem raises net.core.optmem_max in the calling thread's namespace.
func raiseOptMem(want int) (before, after int, err error) {
	before, err = OptMemMax()
	if err != nil {
		return 0, 0, err
	}
	if before >= want {
		return before, before, nil
	}
	if err := os.WriteFile(OptMemPath, []byte(strconv.Itoa(want)+"\n"), 0o644); err != nil {
		return before, before, fmt.Errorf("tcpao: set net.core.optmem_max=%d: %w", want, err)
	}
	after, err = OptMemMax()
	return before, after, err
}

func sameFile(a, b *os.File) (bool, error) {
	sa, err := a.Stat()
	if err != nil {
		return false, fmt.Errorf("tcpao: stat %s: %w", a.Name(), err)
	}
	sb, err := b.Stat()
	if err != nil {
		return false, fmt.Errorf("tcpao: stat %s: %w", b.Name(), err)
	}
	x, y := sa.Sys().(*syscall.Stat_t), sb.Sys().(*syscall.Stat_t)
	return x.Dev == y.Dev && x.Ino == y.Ino, nil
}
