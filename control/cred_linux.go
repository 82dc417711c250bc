package control

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

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
	var serr error
	if err := raw.Control(func(fd uintptr) {
		u, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid}, nil
}
