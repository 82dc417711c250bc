//go:build linux

package tcpao_test

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/tcpao"
)

// keepaliveOf reads SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL and
// TCP_KEEPCNT of c's socket.
func keepaliveOf(t *testing.T, rc syscall.RawConn) [4]int {
	t.Helper()
	var got [4]int
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		for i, o := range [][2]int{{unix.SOL_SOCKET, unix.SO_KEEPALIVE}, {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, {unix.IPPROTO_TCP, unix.TCP_KEEPCNT}} {
			if got[i], err = unix.GetsockoptInt(int(fd), o[0], o[1]); err != nil {
				return
			}
		}
	}); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A keepalive probe changes the socket's keepalive settings only between
// its arming and its end, and on a socket whose owner turned SO_KEEPALIVE
// on only the idle time (tcpao.PeerProber's invariants). Plain TCP on loopback:
// the settings are TCP's, so the host runs it too.
func TestPeerProbeSettings(t *testing.T) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{KeepAlive: -1} // Go's dialer turns keepalive on unless told not to
	d.SetMultipathTCP(false)
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// The owner's own settings, to be found and put back.
	if err := rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 300)
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 4)
	}); err != nil {
		t.Fatal(err)
	}
	before := keepaliveOf(t, rc)
	if before[0] != 0 || before[1] != 300 || before[3] != 4 {
		t.Fatalf("set-up: keepalive %v, want off, idle 300, count 4", before)
	}
	s := tcpao.New(rc)
	p, err := tcpao.ArmPeerProbe(s)
	if err != nil || !p.Armed {
		t.Fatalf("ArmPeerProbe = %+v, %v; want armed", p, err)
	}
	if got, want := keepaliveOf(t, rc), [4]int{1, 1, 32767, 127}; got != want {
		t.Fatalf("armed: keepalive %v, want %v", got, want)
	}
	if err := tcpao.EndPeerProbe(s, p); err != nil {
		t.Fatal(err)
	}
	if got := keepaliveOf(t, rc); got != before {
		t.Fatalf("after the end: keepalive %v, want %v as found", got, before)
	}
	// The owner's keepalive (Go's net package turns it on for every
	// connection, gobgpd's too): its idle time alone changes, and comes
	// back.
	if err := c.(*net.TCPConn).SetKeepAlive(true); err != nil {
		t.Fatal(err)
	}
	owner := keepaliveOf(t, rc)
	p, err = tcpao.ArmPeerProbe(s)
	if err != nil || !p.Armed || !p.OwnerKeepalive {
		t.Fatalf("ArmPeerProbe on the owner's keepalive = %+v, %v; want armed on the owner's", p, err)
	}
	if got, want := keepaliveOf(t, rc), [4]int{1, 1, owner[2], owner[3]}; got != want {
		t.Fatalf("armed on the owner's keepalive: %v, want %v (the idle time alone)", got, want)
	}
	if err := tcpao.EndPeerProbe(s, p); err != nil {
		t.Fatal(err)
	}
	if got := keepaliveOf(t, rc); got != owner {
		t.Fatalf("owner's keepalive %v came back as %v", owner, got)
	}
}
