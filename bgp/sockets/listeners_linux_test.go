//go:build linux

package sockets

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenerInodes: a listener is listed by its inode under its port, in
// the namespace of this process named by its pid or by 0, and is gone
// from the list once closed; a listener on another port is not listed.
func TestListenerInodes(t *testing.T) {
	l, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no tcp4 loopback here: %v", err)
	}
	defer l.Close()
	other, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := netip.MustParseAddrPort(l.Addr().String()).Port()
	ino := inodeOf(t, l)
	for _, pid := range []int{0, os.Getpid()} {
		got, err := ListenerInodes(pid, port)
		if err != nil {
			t.Skipf("sock_diag not usable here: %v", err)
		}
		if !slices.Equal(got, []uint64{ino}) {
			t.Fatalf("ListenerInodes(%d, %d) = %v, want [%d]", pid, port, got, ino)
		}
	}
	if got, err := (System{}).ListenerInodes(0, port); err != nil || !slices.Equal(got, []uint64{ino}) {
		t.Fatalf("System.ListenerInodes(0, %d) = %v, %v; want [%d]", port, got, err, ino)
	}
	l.Close()
	if got, err := ListenerInodes(0, port); err != nil || len(got) != 0 {
		t.Fatalf("after close: ListenerInodes(0, %d) = %v, %v; want none", port, got, err)
	}
}

// inodeOf is the inode of l's socket.
func inodeOf(t *testing.T, l net.Listener) uint64 {
	t.Helper()
	rc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return st.Ino
}
