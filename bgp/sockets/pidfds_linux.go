//go:build linux

package sockets

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// pidfds keeps one pidfd per process that sockets are borrowed from, so
// that a borrow is pidfd_getfd alone, not pidfd_open, pidfd_getfd and two
// closes: a fleet-wide roll borrows each session's descriptor several
// times, and in the emulated guest the open and close were a tenth of
// aokeyd's CPU over the roll. A pidfd names one process for its life: a
// cached one whose process exited answers ESRCH (the borrow is stale, as
// before; the entry is dropped), and a new process that reuses the PID is
// never reached through it. Entries of exited processes that nobody
// borrows from again are swept (poll says a pidfd is readable once its
// process exited) whenever a new process's pidfd is opened, so the cache
// holds a descriptor per live process at most.
var pidfds = struct {
	sync.Mutex
	m map[int]*pidfd
}{m: map[int]*pidfd{}}

type pidfd struct {
	fd    int
	users int
	gone  bool // dropped from the map: closed when the last user is done
}

// acquirePidfd returns pid's cached pidfd, opening it on first use;
// releasePidfd must follow.
func acquirePidfd(pid int) (*pidfd, error) {
	pidfds.Lock()
	defer pidfds.Unlock()
	if p := pidfds.m[pid]; p != nil {
		p.users++
		return p, nil
	}
	sweepPidfds()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pidfd_open pid %d: %w (%w)", pid, ErrStale, err)
		}
		return nil, fmt.Errorf("pidfd_open pid %d: %w", pid, err)
	}
	p := &pidfd{fd: fd, users: 1}
	pidfds.m[pid] = p
	return p, nil
}

// releasePidfd ends a use of p; exited drops it (its process is gone).
func releasePidfd(pid int, p *pidfd, exited bool) {
	pidfds.Lock()
	defer pidfds.Unlock()
	p.users--
	if exited && !p.gone {
		dropPidfd(pid, p)
	}
	if p.gone && p.users == 0 {
		unix.Close(p.fd)
	}
}

// dropPidfd takes p out of the map (pidfds held).
func dropPidfd(pid int, p *pidfd) {
	p.gone = true
	if pidfds.m[pid] == p {
		delete(pidfds.m, pid)
	}
}

// sweepPidfds drops the unused pidfds of exited processes (pidfds held).
func sweepPidfds() {
	for pid, p := range pidfds.m {
		if p.users > 0 {
			continue
		}
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			dropPidfd(pid, p)
			unix.Close(p.fd)
		}
	}
}

// cachedPidfds is how many pidfds the cache holds (for tests).
func cachedPidfds() int {
	pidfds.Lock()
	defer pidfds.Unlock()
	return len(pidfds.m)
}
