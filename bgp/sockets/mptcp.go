package sockets

import (
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

// MPTCPError is Finder.Listeners' answer when the process listens on the
// port with a Multipath TCP socket that the TCP listener dump does not
// name (its subflow listed under an inode of its own): such a listener
// refuses every TCP-AO key, so it is reported, never taken for "no
// listener". It matches tcpao.ErrMPTCP. Go 1.24 and later listen with
// MPTCP by default where the kernel has CONFIG_MPTCP: GODEBUG
// multipathtcp=0 in the speaker's environment makes it plain TCP.
type MPTCPError struct {
	PID   int
	Comm  string // the process's command name ("" if unreadable)
	FD    int    // the listener's descriptor number in the process
	Local netip.AddrPort
}

func (e *MPTCPError) Error() string {
	who := fmt.Sprintf("pid %d", e.PID)
	if e.Comm != "" {
		who = fmt.Sprintf("%s (pid %d)", e.Comm, e.PID)
	}
	return fmt.Sprintf("%s listens on %s with a Multipath TCP socket (fd %d): %v", who, e.Local, e.FD, tcpao.ErrMPTCP)
}

// Unwrap is tcpao.ErrMPTCP.
func (e *MPTCPError) Unwrap() error { return tcpao.ErrMPTCP }
