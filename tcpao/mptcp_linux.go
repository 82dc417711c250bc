//go:build linux

package tcpao

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// classifyMPTCP returns err, the failure of a TCP-level socket option on
// fd, or ErrMPTCP wrapping it when fd is a Multipath TCP socket. An MPTCP
// socket answers every TCP option it does not pass to its subflows with
// ENOPROTOOPT (setsockopt) or EOPNOTSUPP (getsockopt); a kernel without
// CONFIG_TCP_AO answers ENOPROTOOPT too, so the errno alone cannot tell
// the two apart, and the socket's SO_PROTOCOL does. It is read only for
// those two errnos: a call that succeeds, or fails otherwise, costs
// nothing more. A protocol that cannot be read leaves err as it is.
func classifyMPTCP(fd int, err error) error { return classifyMPTCPBy(soProtocol, fd, err) }

// classifyMPTCPBy is classifyMPTCP reading SO_PROTOCOL with protocol (a
// test answers for a kernel without MPTCP).
func classifyMPTCPBy(protocol func(fd int) (int, error), fd int, err error) error {
	if err == nil || (!errors.Is(err, unix.ENOPROTOOPT) && !errors.Is(err, unix.EOPNOTSUPP)) {
		return err
	}
	if p, perr := protocol(fd); perr == nil && p == unix.IPPROTO_MPTCP {
		return fmt.Errorf("%w (%w)", ErrMPTCP, err)
	}
	return err
}

// soProtocol reads the socket's SO_PROTOCOL.
func soProtocol(fd int) (int, error) {
	return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
}
