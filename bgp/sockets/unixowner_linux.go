package sockets

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// soAcceptCon is __SO_ACCEPTCON in /proc/net/unix's Flags column: the
// socket listens.
const soAcceptCon = 0x10000

// UnixListenerOwner is the process listening on the unix socket at path in
// this network namespace (/proc/net/unix is the reader's namespace's): a
// speaker found by its control socket (BIRD's bird.ctl) needs no pid file
// and no unique process name, so two BIRDs (Debian's bird2 and bird3, or
// one in another namespace) are told apart.
func UnixListenerOwner(path string) (int, error) {
	inode, err := unixListenerInode("/proc/net/unix", path)
	if err != nil {
		return 0, err
	}
	pid, _, err := FindOwner(inode)
	if err != nil {
		return 0, fmt.Errorf("the process listening on %s: %w", path, err)
	}
	return pid, nil
}

// unixListenerInode reads table (/proc/net/unix's format: Num RefCount
// Protocol Flags Type St Inode Path) for the listening socket bound to
// path.
func unixListenerInode(table, path string) (uint64, error) {
	b, err := os.ReadFile(table)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 8 || string(f[7]) != path {
			continue
		}
		flags, err1 := strconv.ParseUint(string(f[3]), 16, 32)
		inode, err2 := strconv.ParseUint(string(f[6]), 10, 64)
		if err1 != nil || err2 != nil || flags&soAcceptCon == 0 {
			continue
		}
		return inode, nil
	}
	return 0, fmt.Errorf("no process listens on %s in this network namespace: %w", path, ErrNoProcess)
}
