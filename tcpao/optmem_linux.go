//go:build linux

package tcpao

import (
	"fmt"
	"os"
	"strconv"

	"github.com/aokeyd/aokeyd/internal/netns"
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
	var raiseErr error
	if err := netns.Do(pid, func() error {
		before, after, raiseErr = raiseOptMem(want)
		return nil
	}); err != nil {
		return 0, 0, fmt.Errorf("tcpao: %w", err)
	}
	return before, after, raiseErr
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
