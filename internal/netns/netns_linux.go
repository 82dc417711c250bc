package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread that is in the network namespace of process
// pid; pid 0, or a pid in the caller's namespace, runs fn directly on the
// caller's goroutine. Entering another namespace needs CAP_SYS_ADMIN.
// The thread returns to its namespace afterwards; a thread that cannot is
// left locked and Go retires it with its goroutine, so no goroutine ever
// runs in a namespace it did not ask for.
func Do(pid int, fn func() error) error {
	if pid == 0 {
		return fn()
	}
	target := fmt.Sprintf("/proc/%d/ns/net", pid)
	same, err := sameFile(target, "/proc/thread-self/ns/net")
	if err != nil {
		return fmt.Errorf("network namespace of pid %d: %w", pid, err)
	}
	if same {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			restored = true
			errc <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer orig.Close()
		tns, err := os.Open(target)
		if err != nil {
			restored = true
			errc <- fmt.Errorf("network namespace of pid %d: %w", pid, err)
			return
		}
		defer tns.Close()
		if err := unix.Setns(int(tns.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true
			errc <- fmt.Errorf("enter the network namespace of pid %d (needs CAP_SYS_ADMIN): %w", pid, os.NewSyscallError("setns", err))
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			restored = true
		} else if ferr == nil {
			ferr = fmt.Errorf("leave the network namespace of pid %d: %w", pid, os.NewSyscallError("setns", err))
		}
		errc <- ferr
	}()
	return <-errc
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
