//go:build linux

package rotatorkernel

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestKernelRollQuietSession: both ends of a session over which nothing is
// sent (a BGP session between two keepalives) roll the key on the real
// kernel: each wait for the peer's segment is ended by the answer to a
// keepalive probe (rotator/peerprobe.go, tcpao.PeerProber), and both
// sockets' keepalive settings are as found afterwards: the server's
// Go-made keepalive (its owner's) and the client's, turned off. Without the probes
// nothing crosses the session, and the roll waits out the switch timeout.
func TestKernelRollQuietSession(t *testing.T) {
	kerneltest.Require(t)
	s := dialQuiet(t, loKey(0))
	cfg := rotator.Config{SwitchTimeout: 5 * time.Minute, Grace: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Backoff: time.Second}
	us, them := s.rotators(t, cfg, loKey(0))
	// The server keeps Go's keepalive (its owner's: only the idle time
	// may change, and comes back); the client has none (armed and put
	// back whole).
	if err := s.cli.SetKeepAlive(false); err != nil {
		t.Fatal(err)
	}
	found := map[string][4]int{"server": keepaliveOf(t, s.srv), "client": keepaliveOf(t, s.cli)}
	if found["server"][0] != 1 || found["client"][0] != 0 {
		t.Fatalf("set-up: SO_KEEPALIVE server %d client %d, want 1 and 0", found["server"][0], found["client"][0])
	}
	nk := loKey(1)
	start := time.Now()
	us.SetDesired(pid("client"), want(nk))
	them.SetDesired(pid("server"), want(nk))
	// A roll takes two probes a side, each sent after a second of idle:
	// seconds; the bound holds on a loaded emulated machine, and is far
	// below the switch timeout the roll would otherwise wait out.
	waitFor(t, "the roll on a quiet session", 2*time.Minute, func() bool {
		return statusOf(us, pid("client")).Rolls == 1 && statusOf(them, pid("server")).Rolls == 1
	})
	took := time.Since(start)
	for side, c := range map[string]*net.TCPConn{"server": s.srv, "client": s.cli} {
		sock := map[string]tcpao.Socket{"server": s.srvS, "client": s.cliS}[side]
		ks, err := sock.Keys(tcpao.KeyFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) != 1 || ks[0].SendID != nk.SendID || !ks[0].IsCurrent || ks[0].PktGood == 0 {
			t.Fatalf("%s keys %+v, want only send=%d, current, verified", side, ks, nk.SendID)
		}
		in, err := sock.Info()
		if err != nil {
			t.Fatal(err)
		}
		if in.PktBad != 0 || in.PktKeyNotFound != 0 {
			t.Fatalf("%s pkt_bad=%d key_not_found=%d", side, in.PktBad, in.PktKeyNotFound)
		}
		if got := keepaliveOf(t, c); got != found[side] {
			t.Fatalf("%s keepalive (on, idle, interval, count) %v after the roll, want %v as found", side, got, found[side])
		}
	}
	// The session still carries data with the new key.
	if _, err := s.cli.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	_ = s.srv.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(s.srv, buf); err != nil {
		t.Fatalf("data after the roll: %v", err)
	}
	t.Logf("quiet session rolled in %v (both ends)", took.Round(time.Millisecond))
}

// keepaliveOf is c's SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL and
// TCP_KEEPCNT.
func keepaliveOf(t *testing.T, c *net.TCPConn) [4]int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got [4]int
	if cerr := rc.Control(func(fd uintptr) {
		for i, o := range [][2]int{{unix.SOL_SOCKET, unix.SO_KEEPALIVE}, {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, {unix.IPPROTO_TCP, unix.TCP_KEEPCNT}} {
			if got[i], err = unix.GetsockoptInt(int(fd), o[0], o[1]); err != nil {
				return
			}
		}
	}); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	return got
}
