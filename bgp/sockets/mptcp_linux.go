//go:build linux

package sockets

import (
	"errors"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/sockaddr"
)

// mptcpListener looks through process pid's socket descriptors, lowest
// first (a speaker opens its listeners first), for a Multipath TCP socket
// listening on port (0: any), and returns it as an *MPTCPError; nil when
// there is none, or when the descriptors cannot be borrowed (that is no
// answer, and the caller reports no listener as before). Each socket
// descriptor costs a pidfd_getfd and three getsockopt calls, so Listeners
// runs it only when the dump lists a listener on the port that none of
// pid's descriptors is: never while the speaker's TCP listener is found.
func mptcpListener(pid int, port uint16) error {
	dir, fds, err := fdNumbers(pid)
	if err != nil {
		return err
	}
	pp, err := acquirePidfd(pid)
	if err != nil {
		return err
	}
	exited := false
	defer func() { releasePidfd(pid, pp, exited) }()
	for _, n := range fds {
		if _, ok := socketInode(dir + "/" + strconv.Itoa(n)); !ok {
			continue
		}
		fd, err := unix.PidfdGetfd(pp.fd, n, 0)
		if err != nil {
			if errors.Is(err, unix.EBADF) {
				continue // closed since the directory was read
			}
			exited = errors.Is(err, unix.ESRCH)
			return nil
		}
		local, ok := mptcpListening(fd)
		unix.Close(fd)
		if ok && (port == 0 || local.Port() == port) {
			return &MPTCPError{PID: pid, Comm: Comm(pid), FD: n, Local: local}
		}
	}
	return nil
}

// mptcpListening reports whether fd is a listening Multipath TCP socket,
// and its local address.
func mptcpListening(fd int) (netip.AddrPort, bool) {
	if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || p != unix.IPPROTO_MPTCP {
		return netip.AddrPort{}, false
	}
	if l, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || l != 1 {
		return netip.AddrPort{}, false
	}
	return sockaddr.Bound(fd)
}
