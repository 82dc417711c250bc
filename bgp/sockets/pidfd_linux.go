//go:build linux

package sockets

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// WithSocket duplicates the socket named by ref out of process ref.PID with
// pidfd_getfd (on the process's pidfd, opened once: pidfds), checks that
// the duplicate is that socket (inode, and SO_COOKIE for an established
// socket), runs fn on it and closes it before returning. fn must not keep
// fd. ErrStale: the process or socket is gone or was replaced.
func WithSocket(ref Ref, fn func(fd int) error) error {
	pp, err := acquirePidfd(ref.PID)
	if err != nil {
		return err
	}
	fd, err := getfd(pp.fd, ref)
	exited := errors.Is(err, unix.ESRCH)
	defer func() { releasePidfd(ref.PID, pp, exited) }()
	if errors.Is(err, ErrStale) {
		// The descriptor number may have changed (dup2, close+reopen):
		// look the inode up again once.
		n, ferr := FindFD(ref.PID, ref.Inode)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		ref.FD = n
		fd, err = getfd(pp.fd, ref)
		exited = exited || errors.Is(err, unix.ESRCH)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd)
}

func getfd(pidfd int, ref Ref) (int, error) {
	fd, err := unix.PidfdGetfd(pidfd, ref.FD, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EBADF):
			return -1, fmt.Errorf("pidfd_getfd pid %d fd %d: %w (%w)", ref.PID, ref.FD, ErrStale, err)
		case errors.Is(err, unix.ESRCH):
			return -1, fmt.Errorf("pidfd_getfd pid %d: process exited: %w (%w)", ref.PID, ErrStale, err)
		case errors.Is(err, unix.EPERM):
			return -1, fmt.Errorf("pidfd_getfd pid %d fd %d (same uid or CAP_SYS_PTRACE needed): %w", ref.PID, ref.FD, err)
		}
		return -1, fmt.Errorf("pidfd_getfd pid %d fd %d: %w", ref.PID, ref.FD, err)
	}
	if err := verify(fd, ref); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func verify(fd int, ref Ref) error {
	if ref.Cookie != 0 && !ref.Listening {
		// An established socket: its SO_COOKIE names it (a socket's
		// cookie is unique for the kernel's life), so the inode check
		// below adds nothing and costs a syscall per borrow, eight of
		// which a session's roll makes. Not a socket at all: ENOTSOCK.
		c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
		if errors.Is(err, unix.ENOTSOCK) {
			return fmt.Errorf("pid %d fd %d is not a socket, want socket inode %d: %w", ref.PID, ref.FD, ref.Inode, ErrStale)
		}
		if err != nil {
			return fmt.Errorf("SO_COOKIE of pid %d fd %d: %w", ref.PID, ref.FD, err)
		}
		if c != ref.Cookie {
			return fmt.Errorf("pid %d fd %d has cookie %d, want %d: %w", ref.PID, ref.FD, c, ref.Cookie, ErrStale)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat duplicate of pid %d fd %d: %w", ref.PID, ref.FD, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Ino != ref.Inode {
		return fmt.Errorf("pid %d fd %d is inode %d, want socket inode %d: %w", ref.PID, ref.FD, st.Ino, ref.Inode, ErrStale)
	}
	// A listener's cookie in a sock_diag dump does not always equal its
	// SO_COOKIE: a Multipath TCP listener's dump entry is its subflow,
	// whose cookie is not the MPTCP socket's (seen on Linux 6.18, where
	// both have the descriptor's inode); the inode alone names a live
	// socket.
	return nil
}
