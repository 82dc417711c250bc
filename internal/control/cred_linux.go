package control

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerCred reads the connected process's credentials (SO_PEERCRED) and
// supplementary groups (SO_PEERGROUPS), both recorded by the kernel at
// connect(): nothing is looked up by pid, which another process may have
// taken by the time of the request.
func peerCred(c net.Conn) (Cred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, errors.New("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	var u *unix.Ucred
	var groups []uint32
	var serr, gerr error
	if err := raw.Control(func(fd uintptr) {
		u, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
	}); err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	if gerr != nil && !errors.Is(gerr, unix.ENOPROTOOPT) {
		// (A kernel before 4.13 has no SO_PEERGROUPS: the primary group
		// alone is checked there.)
		return Cred{}, gerr
	}
	return Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid, Groups: groups}, nil
}

// peerGroups is getsockopt(SO_PEERGROUPS): an array of gid_t, growing the
// buffer when the kernel answers ERANGE with the size it needs.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]byte, 64*4)
	for range 4 {
		n := uint32(len(buf))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == unix.ERANGE && int(n) > len(buf):
			buf = make([]byte, n)
			continue
		case errno != 0:
			return nil, os.NewSyscallError("getsockopt SO_PEERGROUPS", errno)
		}
		out := make([]uint32, 0, n/4)
		for i := 0; i+4 <= int(n); i += 4 {
			out = append(out, binary.NativeEndian.Uint32(buf[i:]))
		}
		return out, nil
	}
	return nil, os.NewSyscallError("getsockopt SO_PEERGROUPS", unix.ERANGE)
}
