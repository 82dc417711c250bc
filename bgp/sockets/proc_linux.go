//go:build linux

package sockets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FDTable maps socket inode -> descriptor number for process pid, read from
// /proc/<pid>/fd (readlink "socket:[inode]").
func FDTable(pid int) (map[uint64]int, error) {
	dir, fds, err := fdNumbers(pid)
	if err != nil {
		return nil, err
	}
	m := make(map[uint64]int, len(fds))
	for _, fd := range fds {
		if ino, ok := socketInode(dir + "/" + strconv.Itoa(fd)); ok {
			m[ino] = fd
		}
	}
	return m, nil
}

// fdNumbers lists process pid's descriptor numbers, lowest first, and the
// /proc directory they are links in. ErrStale: the process is gone.
func fdNumbers(pid int) (dir string, fds []int, err error) {
	dir = "/proc/" + strconv.Itoa(pid) + "/fd"
	names, err := readDirNames(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return dir, nil, fmt.Errorf("read %s: %w (%w)", dir, ErrStale, err)
		}
		return dir, nil, fmt.Errorf("read %s (same uid or CAP_SYS_PTRACE needed): %w", dir, err)
	}
	fds = make([]int, 0, len(names))
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	return dir, fds, nil
}

// FindFD returns the descriptor number of the socket with this inode in
// process pid, or ErrStale if the process has no such descriptor. The
// newest descriptors are looked at first (a socket looked up by inode is
// most often a session just accepted), and the search stops at the match.
func FindFD(pid int, inode uint64) (int, error) {
	t, _, err := findFDs(pid, []uint64{inode}, true)
	if err != nil {
		return -1, err
	}
	fd, ok := t[inode]
	if !ok {
		return -1, fmt.Errorf("pid %d has no descriptor for socket inode %d: %w", pid, inode, ErrStale)
	}
	return fd, nil
}

// findFDs is FDTable for the sockets in want alone: it reads the links of
// pid's descriptors in number order (from the highest with newestFirst)
// and stops once every inode in want was found. A speaker with hundreds of
// sessions holds as many descriptors: reading every link for each lookup
// made taking over N sessions N² readlinks, and each pass's listener lookup
// N (its listeners are among the lowest numbers, its newest sessions the
// highest). read is how many links were read, for the tests.
func findFDs(pid int, want []uint64, newestFirst bool) (found map[uint64]int, read int, err error) {
	dir, fds, err := fdNumbers(pid)
	if err != nil {
		return nil, 0, err
	}
	if newestFirst {
		slices.Reverse(fds)
	}
	left := make(map[uint64]bool, len(want))
	for _, ino := range want {
		left[ino] = true
	}
	found = make(map[uint64]int, len(want))
	for _, fd := range fds {
		if len(left) == 0 {
			break
		}
		read++
		ino, ok := socketInode(dir + "/" + strconv.Itoa(fd))
		if ok && left[ino] {
			found[ino] = fd
			delete(left, ino)
		}
	}
	return found, read, nil
}

// readDirNames lists a directory's names without stat-ing them (os.ReadDir
// sorts them as strings; fdNumbers sorts by number).
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// FindOwner scans /proc for the process holding the socket with this inode
// (the first one found; a socket shared across fork has several). It is how
// the speaker's pid is found from its listener when no pid is configured.
func FindOwner(inode uint64) (pid, fd int, err error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, fmt.Errorf("read /proc: %w", err)
	}
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, e := range ents {
			if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
				fd, err := strconv.Atoi(e.Name())
				if err == nil {
					return pid, fd, nil
				}
			}
		}
	}
	return 0, 0, fmt.Errorf("no readable process holds socket inode %d: %w", inode, ErrNotFound)
}

// Comm is process pid's command name (/proc/PID/comm), "" when it cannot
// be read: for messages.
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func socketInode(link string) (uint64, bool) {
	l, err := os.Readlink(link)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(l, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(s, 10, 64)
	return ino, err == nil
}
