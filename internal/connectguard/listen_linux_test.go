//go:build linux

package connectguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/tcpao"
)

// listenCall is one ListenFunc call as the test's keying function saw it:
// what it was given, and what the duplicate it was handed is.
type listenCall struct {
	ListenSocket
	dupCookie    uint64 // SO_COOKIE of Dup: the program's socket's, if Dup is a duplicate of it
	dupListening int    // SO_ACCEPTCONN of Dup while the listen is held
}

// keyer is an injected ListenFunc (the daemon's keying, which needs
// TCP-AO, stands outside): each call is reported on calls and waits until
// the test releases it with an answer, or its context ends.
type keyer struct {
	calls chan listenCall
	mu    sync.Mutex
	gate  chan struct{} // closed: every call waiting returns answer
	ans   error
}

func newKeyer() *keyer { return &keyer{calls: make(chan listenCall, 8), gate: make(chan struct{})} }

func (k *keyer) listen(ctx context.Context, l ListenSocket) error {
	c := listenCall{ListenSocket: l}
	c.dupCookie, _ = unix.GetsockoptUint64(l.Dup, unix.SOL_SOCKET, unix.SO_COOKIE)
	c.dupListening, _ = unix.GetsockoptInt(l.Dup, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	k.calls <- c
	k.mu.Lock()
	gate := k.gate
	k.mu.Unlock()
	select {
	case <-gate:
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.ans
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release answers every call waiting now with err and makes the next calls
// wait again.
func (k *keyer) release(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ans = err
	close(k.gate)
	k.gate = make(chan struct{})
}

// answerNow makes every call, waiting or to come, return err at once.
func (k *keyer) answerNow(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ans = err
	close(k.gate)
}

func (k *keyer) next(t *testing.T) listenCall {
	t.Helper()
	select {
	case c := <-k.calls:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("ListenFunc not called")
	}
	return listenCall{}
}

func (k *keyer) drain() int {
	n := 0
	for {
		select {
		case <-k.calls:
			n++
		default:
			return n
		}
	}
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := listenPlain("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// listenLine is a connector's answer to listen: the listener's cookie and
// protocol, or the errno.
func listenLine(t *testing.T, line string) (cookie uint64, proto int, errno unix.Errno) {
	t.Helper()
	if _, err := fmt.Sscanf(line, "ok %d %d", &cookie, &proto); err == nil {
		return cookie, proto, 0
	}
	var e int
	if _, err := fmt.Sscanf(line, "err %d", &e); err != nil {
		t.Fatalf("connector: %q", line)
	}
	return 0, 0, unix.Errno(e)
}

// TestSuperviseListen runs a supervised program's listen(2) calls on the
// host kernel through the supervisor, with an injected ListenFunc in place
// of the daemon's keying: a listen on a managed port is held (the socket
// does not listen, a SYN to it is refused) until the ListenFunc returns,
// which got a duplicate of exactly that socket; it then proceeds, or fails
// with EKEYREJECTED when the ListenFunc failed. Listens on other ports and
// of unix sockets, and a repeated listen, go on without a question.
func TestSuperviseListen(t *testing.T) {
	port := freePort(t)
	p := launchConnector(t)
	k := newKeyer()
	events, stop := startSupervisor(t, p.sock, func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
		return nil, 0, 0, false
	}, SupervisorOptions{Ports: []uint16{port}, Listen: k.listen})
	addr := func(host string) string { return fmt.Sprintf("%s:%d", host, port) }

	var keyed uint64
	t.Run("held until keyed", func(t *testing.T) {
		p.send("listen tcp4 " + addr("127.0.0.1"))
		c := k.next(t)
		if c.PID != p.prog || c.Local.String() != addr("127.0.0.1") || c.Cookie == 0 || c.dupCookie != c.Cookie || c.Inode == 0 || c.BoundDev != 0 {
			t.Fatalf("ListenFunc got %+v (program pid %d)", c, p.prog)
		}
		if c.dupListening != 0 {
			t.Error("the socket listens already while ListenFunc keys it")
		}
		// Held: the program's listen has not returned, and the kernel
		// takes no SYN on the socket.
		time.Sleep(200 * time.Millisecond)
		select {
		case l := <-p.lines:
			t.Fatalf("listen returned before it was keyed: %q", l)
		default:
		}
		if conn, err := dialPlain(addr("127.0.0.1"), 2*time.Second); err == nil {
			conn.Close()
			t.Fatal("a SYN to the socket held in listen() was accepted")
		} else if !errors.Is(err, unix.ECONNREFUSED) {
			t.Fatalf("dial while held: %v, want ECONNREFUSED", err)
		}
		k.release(nil)
		cookie, proto, errno := listenLine(t, p.line(30*time.Second))
		if errno != 0 || cookie != c.Cookie || proto != unix.IPPROTO_TCP {
			t.Fatalf("listen: cookie %d proto %d errno %v; keyed socket's cookie %d", cookie, proto, errno, c.Cookie)
		}
		e := nextEvent(t, events)
		if e.Outcome != Keyed || !e.Listen || e.PID != p.prog || e.Local.String() != addr("127.0.0.1") || e.Err != nil {
			t.Fatalf("event %+v", e)
		}
		conn, err := dialPlain(addr("127.0.0.1"), 5*time.Second)
		if err != nil {
			t.Fatalf("dial after the listen: %v", err)
		}
		conn.Close()
		keyed = cookie
		k.drain() // a listen interrupted and restarted is asked about again
	})
	t.Run("other port continued without asking", func(t *testing.T) {
		p.send("listen tcp4 127.0.0.1:0")
		if _, _, errno := listenLine(t, p.line(30*time.Second)); errno != 0 {
			t.Fatalf("listen: %v", errno)
		}
		e := nextEvent(t, events)
		if e.Outcome != Continued || !e.Listen || e.PID != p.prog || e.Local.Port() == port || e.Local.Port() == 0 {
			t.Fatalf("event %+v", e)
		}
		if n := k.drain(); n != 0 {
			t.Errorf("ListenFunc asked %d times about another port", n)
		}
	})
	t.Run("unix socket continued without asking", func(t *testing.T) {
		p.send("listen unix " + t.TempDir() + "/l.sock")
		if _, _, errno := listenLine(t, p.line(30*time.Second)); errno != 0 {
			t.Fatalf("listen: %v", errno)
		}
		if e := nextEvent(t, events); e.Outcome != Continued || !e.Listen || e.Local.IsValid() {
			t.Fatalf("event %+v", e)
		}
		if n := k.drain(); n != 0 {
			t.Errorf("ListenFunc asked %d times about a unix socket", n)
		}
	})
	t.Run("repeated listen", func(t *testing.T) {
		p.send(fmt.Sprintf("relisten %d", keyed))
		if l := p.line(30 * time.Second); l != "ok" {
			t.Fatalf("relisten: %q", l)
		}
		if e := nextEvent(t, events); e.Outcome != AlreadyKeyed || !e.Listen || e.Local.String() != addr("127.0.0.1") {
			t.Fatalf("event %+v", e)
		}
		if n := k.drain(); n != 0 {
			t.Errorf("ListenFunc asked %d times about a socket that listens already", n)
		}
	})
	t.Run("keying fails closed", func(t *testing.T) {
		p.send("listen tcp4 " + addr("127.0.0.2"))
		k.next(t)
		k.release(errors.New("no keys for you"))
		if _, _, errno := listenLine(t, p.line(30*time.Second)); errno != unix.EKEYREJECTED {
			t.Fatalf("listen with a failing ListenFunc: errno %v, want EKEYREJECTED", errno)
		}
		if e := nextEvent(t, events); e.Outcome != Denied || !e.Listen || e.Err == nil || !strings.Contains(e.Err.Error(), "no keys for you") {
			t.Fatalf("event %+v", e)
		}
		if conn, err := dialPlain(addr("127.0.0.2"), 2*time.Second); err == nil {
			conn.Close()
			t.Fatal("the refused socket accepts connections")
		}
		k.drain()
	})
	t.Run("Multipath TCP refused, Go falls back to TCP", func(t *testing.T) {
		if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP); err != nil {
			t.Skipf("no Multipath TCP here: %v", err)
		} else {
			unix.Close(fd)
		}
		k.answerNow(nil)
		p.send("listenmptcp " + addr("127.0.0.3"))
		_, proto, errno := listenLine(t, p.line(30*time.Second))
		if errno != 0 || proto != unix.IPPROTO_TCP {
			t.Fatalf("listen: proto %d errno %v, want plain TCP after the fallback", proto, errno)
		}
		var outcomes []Outcome
		for len(outcomes) < 2 {
			e := nextEvent(t, events)
			outcomes = append(outcomes, e.Outcome)
			if e.Outcome == Denied && !errors.Is(e.Err, errMPTCP) {
				t.Errorf("Multipath TCP listen denied with %v", e.Err)
			}
		}
		// Each listen's event is sent after its answer, from its own
		// request: the TCP listen's may come first.
		if !slices.Contains(outcomes, Denied) || !slices.Contains(outcomes, Keyed) {
			t.Fatalf("outcomes %v, want the MPTCP listen denied and the TCP one keyed", outcomes)
		}
		if n := k.drain(); n < 1 {
			t.Error("ListenFunc not asked about the TCP listener")
		}
	})
	t.Run("supervisor stops while a listen waits", func(t *testing.T) {
		k2 := newKeyer()
		stop()
		events, stop := startSupervisor(t, p.sock, func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
			return nil, 0, 0, false
		}, SupervisorOptions{Ports: []uint16{port}, Listen: k2.listen})
		p.send("listen tcp4 " + addr("127.0.0.4"))
		k2.next(t)
		stop() // Run's context ends: the held listen is refused, not left waiting
		if _, _, errno := listenLine(t, p.line(30*time.Second)); errno != unix.EKEYREJECTED {
			t.Fatalf("listen held when the supervisor stopped: errno %v, want EKEYREJECTED", errno)
		}
		if e := nextEvent(t, events); e.Outcome != Denied || !errors.Is(e.Err, context.Canceled) {
			t.Fatalf("event %+v", e)
		}
	})
}

// dialPlain dials addr over plain TCP (never Multipath TCP, which a keyed
// listener's peer must not be: tcpao's TestKeyedSocketsArePlainTCP).
func dialPlain(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	d.SetMultipathTCP(false)
	return d.Dial("tcp4", addr)
}
