//go:build linux

package connectguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kick restarts the calls of process pid to the syscalls nrs (the
// filtered ones: connect, listen) that wait for a supervisor's answer, and
// returns how many threads it signalled.
//
// A notification that a supervisor received (RECV) but never answered stays
// owned by it: when that supervisor dies while the holder keeps the listener
// open, the thread would wait in the call for ever, because a new
// supervisor's RECV only returns notifications nobody has received. The wait
// is interruptible, and the syscall is restarted after a signal handled with
// SA_RESTART, which raises a fresh notification. Kick sends SIGURG to each
// thread of pid whose /proc/<pid>/task/<tid>/syscall shows one of nrs and
// whose wchan (when the kernel shows it) is in seccomp. For a Go program SIGURG is
// the runtime's own preemption signal (installed with SA_RESTART, harmless
// when unexpected); a program that ignores SIGURG is not interrupted by it
// (ignored signals wake nothing), so Kick is a no-op there.
func Kick(pid int, nrs ...uint32) (int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list threads of pid %d: %w", pid, err)
	}
	var errs []error
	n := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !blockedIn(dir+"/"+e.Name(), nrs) {
			continue
		}
		if err := unix.Tgkill(pid, tid, unix.SIGURG); err != nil {
			if !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("tgkill pid %d tid %d: %w", pid, tid, err))
			}
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// blockedIn reports whether the thread of taskDir waits in one of the
// syscalls nrs inside seccomp.
func blockedIn(taskDir string, nrs []uint32) bool {
	b, err := os.ReadFile(taskDir + "/syscall")
	if err != nil {
		return false
	}
	nr, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !slices.ContainsFunc(nrs, func(n uint32) bool { return nr == strconv.FormatUint(uint64(n), 10) }) {
		return false
	}
	w, err := os.ReadFile(taskDir + "/wchan")
	if err != nil || errors.Is(err, fs.ErrPermission) || len(w) == 0 || string(w) == "0" {
		return true // no wchan: the syscall number has to do
	}
	return strings.Contains(string(w), "seccomp")
}
