//go:build linux

package connectguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/tcpao"
)

// recorder is a tcpao.Socket that records what the supervisor installs on
// the duplicated socket (host kernels have no TCP-AO), identified by the
// duplicate's SO_COOKIE.
type recorder struct {
	mu    sync.Mutex
	fail  atomic.Bool
	adds  map[uint64][]added // by socket cookie
	keyed map[uint64]bool
}

type added struct {
	send, recv uint8
	opts       tcpao.AddOptions
}

func newRecorder() *recorder {
	return &recorder{adds: map[uint64][]added{}, keyed: map[uint64]bool{}}
}

func (r *recorder) socket(fd int) tcpao.Socket {
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		panic(err)
	}
	return &recSock{r: r, cookie: c}
}

func (r *recorder) get(cookie uint64) []added {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adds[cookie]
}

type recSock struct {
	tcpao.Socket // nil: only the methods the supervisor uses are implemented
	r            *recorder
	cookie       uint64
}

func (s *recSock) Info() (tcpao.Info, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.r.keyed[s.cookie] {
		return tcpao.Info{}, nil
	}
	return tcpao.Info{}, fmt.Errorf("getsockopt(TCP_AO_INFO): %w", unix.ENOENT)
}

func (s *recSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if s.r.fail.Load() {
		return fmt.Errorf("setsockopt(TCP_AO_ADD_KEY): %w", unix.ENOMEM)
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.adds[s.cookie] = append(s.r.adds[s.cookie], added{k.SendID, k.RecvID, o})
	s.r.keyed[s.cookie] = true
	return nil
}

func testKeys(peer netip.Addr) []tcpao.Key {
	mk := func(send, recv uint8) tcpao.Key {
		return tcpao.Key{
			KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(peer, peer.BitLen()), SendID: send, RecvID: recv},
			Algorithm: tcpao.HMACSHA256,
			Secret:    tcpao.NewSecret([]byte("connectguard-test-key")),
		}
	}
	return []tcpao.Key{mk(1, 2), mk(3, 4)}
}

// acceptAll listens on addr and accepts every connection, keeping it open
// until the test ends (closeAccepted: closing it at once, for benchmarks).
// listenPlain listens on network/addr as a BGP peer does: plain TCP, never
// Go's Multipath TCP listener default, which no router's BGP listener is
// and which takes no TCP-AO key (tcpao.ErrMPTCP).
func listenPlain(network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), network, addr)
}

func acceptAll(t testing.TB, network, addr string) net.Listener {
	return acceptConns(t, network, addr, false)
}

func acceptConns(t testing.TB, network, addr string, closeAccepted bool) net.Listener {
	t.Helper()
	ln, err := listenPlain(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				time.Sleep(10 * time.Millisecond) // EMFILE and friends: retry
				continue
			}
			if closeAccepted {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln
}

type keysCall struct {
	pid int
	dst netip.AddrPort
}

func startSupervisor(t testing.TB, sock string, keys KeysFunc, o SupervisorOptions) (events chan Event, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	l, err := Fetch(ctx, sock)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	events = make(chan Event, 32)
	o.PID = l.PID
	o.Observe = func(e Event) { events <- e }
	s := NewSupervisor(l.FD, keys, o)
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, ErrTargetGone) {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return events, stop
}

// nextEvent returns the next answered connect. It skips Gone events: the
// test program is a Go binary, and the Go runtime's preemption signal
// (SIGURG, as Kick's) interrupts a connect waiting on its notification; the
// kernel restarts it with a fresh notification, and the interrupted one is
// reported Gone. That is the supervisor working as designed, not the outcome
// the test waits for.
func nextEvent(t *testing.T, ev chan Event) Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.Outcome == Gone {
				continue
			}
			return e
		case <-timeout:
			t.Fatal("no notification answered")
		}
	}
}

// drainCalls returns the KeysFunc calls made so far. A connect interrupted
// by the Go runtime's preemption signal is asked about once per notification
// (see nextEvent), so one connect may leave more than one call; every call
// is made before the event that answers its connect is observed.
func drainCalls(calls chan keysCall) []keysCall {
	var cs []keysCall
	for {
		select {
		case c := <-calls:
			cs = append(cs, c)
		default:
			return cs
		}
	}
}

func okCookie(t *testing.T, line string) uint64 {
	t.Helper()
	v, ok := strings.CutPrefix(line, "ok ")
	if !ok {
		t.Fatalf("call failed: %s", line)
	}
	v, _, _ = strings.Cut(v, " ") // a listen's line has the protocol after it
	c, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSupervise runs a real supervised process on the host kernel (seccomp
// user notification, process_vm_readv and pidfd_getfd need no TCP-AO): every
// connect is classified, managed ones get keys on exactly the connecting
// socket, the rest continue untouched.
func TestSupervise(t *testing.T) {
	managed := acceptAll(t, "tcp4", "127.0.0.1:0")
	port := uint16(managed.Addr().(*net.TCPAddr).Port)
	other := acceptAll(t, "tcp4", "127.0.0.1:0")                        // unmanaged port
	sameport := acceptAll(t, "tcp4", fmt.Sprintf("127.0.0.2:%d", port)) // managed port, unmanaged address
	v6, err := listenPlain("tcp6", fmt.Sprintf("[::1]:%d", port))
	if err == nil {
		v6.Close()
	}
	unixPath := t.TempDir() + "/u.sock"
	acceptAll(t, "unix", unixPath)

	p := launchConnector(t)
	rec := newRecorder()
	calls := make(chan keysCall, 8)
	peer := netip.MustParseAddr("127.0.0.1")
	events, _ := startSupervisor(t, p.sock, func(pid int, dst netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
		calls <- keysCall{pid, dst}
		if dst.Addr() != peer {
			return nil, 0, 0, false
		}
		return testKeys(peer), 3, 2, true
	}, SupervisorOptions{Ports: []uint16{port}, Socket: rec.socket})

	progPID := p.prog

	t.Run("managed", func(t *testing.T) {
		cookie := okCookie(t, p.connect("tcp4", managed.Addr().String()))
		e := nextEvent(t, events)
		if e.Outcome != Keyed || e.Keys != 2 || e.PID != progPID || e.Dst.String() != managed.Addr().String() || e.Err != nil {
			t.Fatalf("event %+v (program pid %d)", e, progPID)
		}
		cs := drainCalls(calls)
		if len(cs) == 0 {
			t.Fatal("KeysFunc not called")
		}
		for _, c := range cs {
			if c.pid != progPID || c.dst != e.Dst {
				t.Errorf("KeysFunc(%d, %s), want (%d, %s)", c.pid, c.dst, progPID, e.Dst)
			}
		}
		want := []added{{1, 2, tcpao.AddOptions{SetRNext: true}}, {3, 4, tcpao.AddOptions{SetCurrent: true}}}
		if got := rec.get(cookie); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("keys on the connecting socket (cookie %d): %v, want %v", cookie, got, want)
		}
	})
	t.Run("other port continued without asking", func(t *testing.T) {
		cookie := okCookie(t, p.connect("tcp4", other.Addr().String()))
		e := nextEvent(t, events)
		if e.Outcome != Continued || e.PID != 0 || e.Dst.String() != other.Addr().String() {
			t.Fatalf("event %+v", e)
		}
		if len(calls) != 0 || rec.get(cookie) != nil {
			t.Errorf("unmanaged port: KeysFunc calls %d, keys %v", len(calls), rec.get(cookie))
		}
	})
	t.Run("unmanaged peer on the managed port", func(t *testing.T) {
		cookie := okCookie(t, p.connect("tcp4", sameport.Addr().String()))
		e := nextEvent(t, events)
		if e.Outcome != Continued || e.PID != progPID {
			t.Fatalf("event %+v", e)
		}
		cs := drainCalls(calls)
		if len(cs) == 0 {
			t.Fatal("KeysFunc not called")
		}
		for _, c := range cs {
			if c.dst.String() != sameport.Addr().String() {
				t.Errorf("KeysFunc asked about %s", c.dst)
			}
		}
		if rec.get(cookie) != nil {
			t.Errorf("keys installed for an unmanaged peer: %v", rec.get(cookie))
		}
	})
	t.Run("unix socket", func(t *testing.T) {
		okCookie(t, p.connect("unix", unixPath))
		if e := nextEvent(t, events); e.Outcome != Continued || e.Dst.IsValid() {
			t.Fatalf("event %+v", e)
		}
	})
	t.Run("install fails closed", func(t *testing.T) {
		rec.fail.Store(true)
		defer rec.fail.Store(false)
		line := p.connect("tcp4", managed.Addr().String())
		if !strings.HasPrefix(line, fmt.Sprintf("err %d ", int(unix.EKEYREJECTED))) {
			t.Fatalf("connect with a failing install: %q, want EKEYREJECTED", line)
		}
		if e := nextEvent(t, events); e.Outcome != Denied || !errors.Is(e.Err, unix.ENOMEM) {
			t.Fatalf("event %+v", e)
		}
		if len(drainCalls(calls)) == 0 {
			t.Error("KeysFunc not called")
		}
	})
}

// TestRestartAfterStall: a supervisor that received a connect (or a
// listen) and hangs is killed; the launcher keeps the listener, so the call
// keeps waiting (no ENOSYS), and the next supervisor restarts it (Kick) and
// answers it.
func TestRestartAfterStall(t *testing.T) {
	managed := acceptAll(t, "tcp4", "127.0.0.1:0")
	port := managed.Addr().(*net.TCPAddr).Port
	for _, call := range []string{"connect", "listen"} {
		t.Run(call, func(t *testing.T) {
			p := launchConnector(t)
			cmd := "connect tcp4 " + managed.Addr().String()
			if call == "listen" {
				cmd = fmt.Sprintf("listen tcp4 127.0.0.2:%d", port)
			}
			stall := exec.Command(os.Args[0], "cg-stall-supervisor", p.sock)
			stall.Env = append(os.Environ(), "CG_PORT="+strconv.Itoa(port))
			stall.Stderr = os.Stderr
			out, err := stall.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := stall.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stall.Process.Kill(); _ = stall.Wait() }()
			sc := bufio.NewScanner(out)
			if !sc.Scan() || sc.Text() != "ready" {
				t.Fatalf("stalling supervisor: %q", sc.Text())
			}
			p.send(cmd)
			if !sc.Scan() || sc.Text() != "called" {
				t.Fatalf("stalling supervisor: %q", sc.Text())
			}
			// The call now waits on a notification only the stalled
			// supervisor holds; it cannot have returned.
			select {
			case l := <-p.lines:
				t.Fatalf("%s returned while its notification was unanswered: %q", call, l)
			default:
			}
			if err := stall.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = stall.Wait()

			rec := newRecorder()
			peer := netip.MustParseAddr("127.0.0.1")
			events, _ := startSupervisor(t, p.sock, func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
				return testKeys(peer), 1, 2, true
			}, SupervisorOptions{Ports: []uint16{uint16(port)}, Socket: rec.socket,
				Listen: func(context.Context, ListenSocket) error { return nil }})
			cookie := okCookie(t, p.line(60*time.Second))
			e := nextEvent(t, events)
			if call == "listen" {
				if e.Outcome != Keyed || !e.Listen {
					t.Fatalf("after restart: event %+v", e)
				}
				return
			}
			if e.Outcome != Keyed || len(rec.get(cookie)) != 2 {
				t.Fatalf("after restart: event %+v, keys %v", e, rec.get(cookie))
			}
		})
	}
}

// TestNoHolderENOSYS: with neither launcher nor supervisor holding the
// listener, the program's connects fail with ENOSYS (its other syscalls, and
// sessions already up, are unaffected).
func TestNoHolderENOSYS(t *testing.T) {
	ln := acceptAll(t, "tcp4", "127.0.0.1:0")
	p := launchConnector(t)
	prog := p.prog
	// Before: continued by a supervisor; the connection stays open.
	events, stop := startSupervisor(t, p.sock, func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
		return nil, 0, 0, false
	}, SupervisorOptions{})
	okCookie(t, p.connect("tcp4", ln.Addr().String()))
	nextEvent(t, events)
	stop()
	if err := p.launcher.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = p.launcher.Process.Wait() // not cmd.Wait: the connector's pipes stay open
	line := p.connect("tcp4", ln.Addr().String())
	if !strings.HasPrefix(line, fmt.Sprintf("err %d ", int(unix.ENOSYS))) {
		t.Fatalf("connect with no listener holder: %q, want ENOSYS", line)
	}
	_ = unix.Kill(prog, unix.SIGKILL)
}
