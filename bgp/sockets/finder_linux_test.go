//go:build linux

package sockets

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// plainListen listens on network/addr as a speaker whose sockets aokeyd
// can key does: plain TCP, never Go's Multipath TCP default (an MPTCP
// listener refuses TCP-AO keys: tcpao.ErrMPTCP; mptcp_linux_test.go tries
// one).
func plainListen(network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), network, addr)
}

// pair opens a listener on network/addr in this process, connects to it and
// accepts, returning listener, client and server ends (plain TCP).
func pair(t testing.TB, network, addr string) (*net.TCPListener, *net.TCPConn, *net.TCPConn) {
	t.Helper()
	l, err := plainListen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	t.Cleanup(func() { l.Close() })
	var d net.Dialer
	d.SetMultipathTCP(false)
	c, err := d.Dial(network, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return l.(*net.TCPListener), c.(*net.TCPConn), s.(*net.TCPConn)
}

func rawInt(t testing.TB, sc syscall.Conn, level, opt int) int {
	t.Helper()
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

func TestFinderOwnProcess(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(tc.network, func(t *testing.T) {
			l, c, s := pair(t, tc.network, tc.addr)
			lport := netip.MustParseAddrPort(l.Addr().String()).Port()
			f := Finder{PID: os.Getpid()}

			ls, err := f.Listeners(lport)
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) != 1 || ls[0].Local.Port() != lport || !ls[0].Listening {
				t.Fatalf("listeners on port %d: %+v", lport, ls)
			}
			// The listener's descriptor in this process is the one found.
			rc, _ := l.SyscallConn()
			_ = rc.Control(func(fd uintptr) {
				if int(fd) != ls[0].FD {
					t.Errorf("listener fd %d, found %d", fd, ls[0].FD)
				}
			})

			local := netip.MustParseAddrPort(s.LocalAddr().String())
			remote := netip.MustParseAddrPort(s.RemoteAddr().String())
			est, err := f.Established(local, remote)
			if err != nil {
				t.Fatal(err)
			}
			if est.Listening || est.Local != local || est.Remote != remote || est.Cookie == 0 {
				t.Fatalf("established = %+v", est)
			}
			// The client end has the mirrored tuple: a different socket.
			cli, err := f.Established(remote, local)
			if err != nil {
				t.Fatal(err)
			}
			if cli.Inode == est.Inode {
				t.Fatal("client and server ends have the same inode")
			}

			// An option set through the duplicate is on the original socket.
			for _, r := range []struct {
				ref  Ref
				conn syscall.Conn
				val  int
			}{{ls[0], l, 4321}, {est, s, 8765}} {
				err := WithSocket(r.ref, func(fd int) error {
					return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, r.val)
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := rawInt(t, r.conn, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); got != r.val {
					t.Errorf("%s: TCP_KEEPIDLE = %d, want %d", r.ref, got, r.val)
				}
			}
			_ = c
		})
	}
}

func TestWithSocketStale(t *testing.T) {
	l, _, s := pair(t, "tcp4", "127.0.0.1:0")
	f := Finder{PID: os.Getpid()}
	est, err := f.Established(netip.MustParseAddrPort(s.LocalAddr().String()), netip.MustParseAddrPort(s.RemoteAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := f.Listeners(netip.MustParseAddrPort(l.Addr().String()).Port())
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners: %v %v", ls, err)
	}
	wrongCookie := est
	wrongCookie.Cookie++
	wrongFD := ls[0]
	wrongFD.FD = est.FD // names another socket: re-resolved by inode
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	pipeFD := est
	pipeFD.FD = int(pr.Fd()) // names no socket (ENOTSOCK for its cookie): re-resolved by inode
	otherEst := est
	otherEst.FD = ls[0].FD // names the listener, whose cookie is not est's: re-resolved by inode
	tests := []struct {
		name    string
		ref     Ref
		prep    func()
		wantErr error
	}{
		{name: "cookie changed", ref: wrongCookie, wantErr: ErrStale},
		{name: "fd number moved is re-resolved", ref: wrongFD},
		{name: "established fd now a pipe is re-resolved", ref: pipeFD},
		{name: "established fd now another socket is re-resolved", ref: otherEst},
		{name: "no such process", ref: Ref{PID: 1 << 30, Inode: 1, FD: 3}, wantErr: ErrStale},
		{name: "socket closed", ref: est, prep: func() { s.Close() }, wantErr: ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prep != nil {
				tt.prep()
			}
			called := false
			err := WithSocket(tt.ref, func(int) error { called = true; return nil })
			if tt.wantErr == nil {
				if err != nil || !called {
					t.Fatalf("err=%v called=%v", err, called)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || called {
				t.Fatalf("err=%v called=%v, want %v and fn not called", err, called, tt.wantErr)
			}
		})
	}
}

func TestFindOwner(t *testing.T) {
	l, _, _ := pair(t, "tcp4", "127.0.0.1:0")
	ls, err := Finder{PID: os.Getpid()}.Listeners(netip.MustParseAddrPort(l.Addr().String()).Port())
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners: %v %v", ls, err)
	}
	pid, fd, err := FindOwner(ls[0].Inode)
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() || fd != ls[0].FD {
		t.Fatalf("owner pid %d fd %d, want %d %d", pid, fd, os.Getpid(), ls[0].FD)
	}
}

func BenchmarkListenDump(b *testing.B) {
	pair(b, "tcp4", "127.0.0.1:0")
	d, err := OpenDiag(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for b.Loop() {
		if _, err := d.Listeners(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	_, _, s := pair(b, "tcp4", "127.0.0.1:0")
	local, remote := netip.MustParseAddrPort(s.LocalAddr().String()), netip.MustParseAddrPort(s.RemoteAddr().String())
	d, err := OpenDiag(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for b.Loop() {
		if _, err := d.Lookup(local, remote); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWithSocket(b *testing.B) {
	l, _, _ := pair(b, "tcp4", "127.0.0.1:0")
	ls, err := Finder{PID: os.Getpid()}.Listeners(netip.MustParseAddrPort(l.Addr().String()).Port())
	if err != nil || len(ls) != 1 {
		b.Fatalf("listeners: %v %v", ls, err)
	}
	for b.Loop() {
		if err := WithSocket(ls[0], func(int) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestConnectionsAndListenerOwner(t *testing.T) {
	l, _, s := pair(t, "tcp4", "127.0.0.1:0")
	port := netip.MustParseAddrPort(l.Addr().String()).Port()
	remote := netip.MustParseAddrPort(s.RemoteAddr().String())
	refs, err := Finder{PID: os.Getpid()}.Connections(remote.Addr())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range refs {
		if r.Remote == remote && r.Local.Port() == port {
			found = true
		}
	}
	if !found {
		t.Fatalf("accepted socket from %s not among %v", remote, refs)
	}
	pid, err := ListenerOwner(port)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerOwner(%d) = %d, %v; want %d", port, pid, err, os.Getpid())
	}
}

// TestConnectionsTo: one dump finds the sessions with several neighbors,
// each under its unmapped address, as Connections finds each one's; a
// neighbor with no session has none.
func TestConnectionsTo(t *testing.T) {
	l, _, s := pair(t, "tcp4", "127.0.0.1:0")
	_, _, s6 := pair(t, "tcp6", "[::1]:0")
	port := netip.MustParseAddrPort(l.Addr().String()).Port()
	remote := netip.MustParseAddrPort(s.RemoteAddr().String())
	remote6 := netip.MustParseAddrPort(s6.RemoteAddr().String())
	none := netip.MustParseAddr("192.0.2.77")
	got, err := Finder{PID: os.Getpid()}.ConnectionsTo(map[netip.Addr]bool{remote.Addr(): true, remote6.Addr(): true, none: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []netip.Addr{remote.Addr(), remote6.Addr()} {
		one, err := Finder{PID: os.Getpid()}.Connections(want)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[want]) != len(one) || len(one) == 0 {
			t.Errorf("%s: %d sockets in one dump, %d by Connections", want, len(got[want]), len(one))
		}
	}
	if !slices.ContainsFunc(got[remote.Addr()], func(r Ref) bool { return r.Remote == remote && r.Local.Port() == port }) {
		t.Errorf("accepted socket from %s not among %v", remote, got[remote.Addr()])
	}
	if len(got[none]) != 0 {
		t.Errorf("%s has no session, got %v", none, got[none])
	}
}

// TestFindFDsStopsAtTheMatch: a speaker with hundreds of sessions holds as
// many descriptors, and a lookup read every one's link (taking N sessions
// over cost N² readlinks). The listener is found among the lowest numbers,
// a session just accepted among the highest, and both lookups stop there.
func TestFindFDsStopsAtTheMatch(t *testing.T) {
	l, _, _ := pair(t, "tcp4", "127.0.0.1:0")
	// Descriptors opened between the listener and the newest session.
	for range 200 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
	}
	_, _, s := pair(t, "tcp4", "127.0.0.1:0")
	f := Finder{PID: os.Getpid()}
	lport := netip.MustParseAddrPort(l.Addr().String()).Port()
	ls, err := f.Listeners(lport)
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners on %d: %v, %v", lport, ls, err)
	}
	local := netip.MustParseAddrPort(s.LocalAddr().String())
	remote := netip.MustParseAddrPort(s.RemoteAddr().String())
	est, err := f.Established(local, remote)
	if err != nil {
		t.Fatal(err)
	}
	all, err := FDTable(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		inode       uint64
		newestFirst bool
	}{{"listener, lowest first", ls[0].Inode, false}, {"newest session, highest first", est.Inode, true}} {
		t.Run(tc.name, func(t *testing.T) {
			got, read, err := findFDs(os.Getpid(), []uint64{tc.inode}, tc.newestFirst)
			if err != nil {
				t.Fatal(err)
			}
			if got[tc.inode] != all[tc.inode] || len(got) != 1 {
				t.Fatalf("found %v, want fd %d (the full table's)", got, all[tc.inode])
			}
			if read > 30 {
				t.Errorf("read %d links of %d descriptors to find one socket", read, len(all))
			}
		})
	}
	// An inode the process does not hold: every link is read, none found.
	got, read, err := findFDs(os.Getpid(), []uint64{1}, true)
	if err != nil || len(got) != 0 || read < 200 {
		t.Fatalf("absent inode: found %v after %d links, err %v", got, read, err)
	}
	if _, err := FindFD(os.Getpid(), 1); !errors.Is(err, ErrStale) {
		t.Fatalf("FindFD of an absent inode: %v, want ErrStale", err)
	}
}
