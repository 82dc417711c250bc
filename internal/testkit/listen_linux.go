package testkit

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ListenLoopback is a loopback listener in this process made with
// SetMultipathTCP(mptcp), closed when t ends, with its raw connection, its
// descriptor number and the protocol the kernel gave it (IPPROTO_MPTCP or
// IPPROTO_TCP: where the kernel has no Multipath TCP, Go falls back to
// plain TCP silently, so the socket's protocol is what tells).
func ListenLoopback(t testing.TB, mptcp bool) (ln net.Listener, rc syscall.RawConn, fd, proto int) {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(mptcp)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rc, err = ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	if err := rc.Control(func(f uintptr) { fd = int(f); proto, perr = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL) }); err != nil || perr != nil {
		t.Fatal(err, perr)
	}
	return ln, rc, fd, proto
}
