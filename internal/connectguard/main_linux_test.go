//go:build linux

package connectguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/tcpao"
)

// The test binary plays three more roles, chosen by os.Args[1]:
//
//	cg-launch PROGRAM ARGS...  runs Launch (the tiny parent)
//	cg-connector               the supervised program: connects on command
//	cg-stall-supervisor SOCK   a supervisor whose KeysFunc never returns
//
// and the launcher's child (ChildEnv), handled by RunChildIfRequested.
func TestMain(m *testing.M) {
	RunChildIfRequested()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "cg-launch":
			err := Launch(os.Args[2:], LaunchOptions{SocketPath: os.Getenv("CG_SOCK")})
			fmt.Fprintln(os.Stderr, "launch:", err)
			os.Exit(125)
		case "cg-connector":
			connector(os.Stdin, os.Stdout)
			os.Exit(0)
		case "cg-stall-supervisor":
			os.Exit(stallSupervisor(os.Args[2]))
		}
	}
	os.Exit(m.Run())
}

// connector first says "ready PID" (its own pid: the launcher's child,
// which exec'd it; the launcher has its socket by then), then reads
// commands and answers one line each:
//
//	connect NET ADDR   -> "ok COOKIE" or "err ERRNO-NAME MESSAGE" (conn kept open)
//	bench ADDR N       -> "bench NS" (mean ns per connect+close)
//	listen NET ADDR    -> "ok COOKIE PROTO" or "err ERRNO MESSAGE" (plain TCP; kept open)
//	listenmptcp ADDR   -> the same, asking Go for Multipath TCP (it falls back to TCP)
//	relisten COOKIE    -> listen(2) again on that listener: "ok" or "err ERRNO MESSAGE"
func connector(in io.Reader, out io.Writer) {
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	sc := bufio.NewScanner(in)
	var keep []net.Conn
	listeners := map[uint64]net.Listener{}
	// Plain TCP, as the connects the supervisor keys must be: an MPTCP
	// socket refuses the keys (tcpao.ErrMPTCP). Go's dialers default to
	// it; said, since GODEBUG=multipathtcp=1 would change that default.
	d := net.Dialer{Timeout: 30 * time.Second}
	d.SetMultipathTCP(false)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "connect":
			c, err := d.Dial(f[1], f[2])
			if err != nil {
				var errno syscall.Errno
				errors.As(err, &errno)
				fmt.Fprintf(out, "err %d %v\n", int(errno), err)
				continue
			}
			keep = append(keep, c)
			var cookie uint64
			if tc, ok := c.(*net.TCPConn); ok {
				rc, _ := tc.SyscallConn()
				_ = rc.Control(func(fd uintptr) { cookie, _ = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
			}
			fmt.Fprintf(out, "ok %d\n", cookie)
		case len(f) == 3 && f[0] == "listen", len(f) == 2 && f[0] == "listenmptcp":
			var lc net.ListenConfig
			network, addr := "tcp4", f[1]
			if f[0] == "listen" {
				lc.SetMultipathTCP(false)
				network, addr = f[1], f[2]
			} else {
				lc.SetMultipathTCP(true)
			}
			ln, err := lc.Listen(context.Background(), network, addr)
			if err != nil {
				var errno syscall.Errno
				errors.As(err, &errno)
				fmt.Fprintf(out, "err %d %v\n", int(errno), err)
				continue
			}
			var cookie uint64
			proto := 0
			if sc, ok := ln.(syscall.Conn); ok {
				rc, _ := sc.SyscallConn()
				_ = rc.Control(func(fd uintptr) {
					cookie, _ = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
					proto, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL)
				})
			}
			listeners[cookie] = ln
			fmt.Fprintf(out, "ok %d %d\n", cookie, proto)
		case len(f) == 2 && f[0] == "relisten":
			c, _ := strconv.ParseUint(f[1], 10, 64)
			ln, ok := listeners[c]
			if !ok {
				fmt.Fprintf(out, "err 0 no listener %s\n", f[1])
				continue
			}
			rc, _ := ln.(syscall.Conn).SyscallConn()
			var lerr error
			_ = rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), 64) })
			if lerr != nil {
				var errno syscall.Errno
				errors.As(lerr, &errno)
				fmt.Fprintf(out, "err %d %v\n", int(errno), lerr)
				continue
			}
			fmt.Fprintln(out, "ok")
		case len(f) == 3 && f[0] == "bench":
			n, _ := strconv.Atoi(f[2])
			start := time.Now()
			for i := 0; i < n; i++ {
				c, err := d.Dial("tcp", f[1])
				if err != nil {
					fmt.Fprintf(out, "err 0 %v\n", err)
					break
				}
				c.Close()
			}
			fmt.Fprintf(out, "bench %d\n", time.Since(start).Nanoseconds()/int64(max(n, 1)))
		default:
			fmt.Fprintf(out, "err 0 bad command %q\n", sc.Text())
		}
	}
	for _, c := range keep {
		c.Close()
	}
	for _, ln := range listeners {
		ln.Close()
	}
}

// stallSupervisor takes the listener and never answers a managed connect
// or listen: a supervisor that hangs, then gets killed by the test.
func stallSupervisor(sock string) int {
	l, err := Fetch(context.Background(), sock)
	if err != nil {
		fmt.Println("fetch:", err)
		return 1
	}
	called := make(chan struct{}, 1)
	s := NewSupervisor(l.FD, func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
		called <- struct{}{}
		select {} // stalled for ever
	}, SupervisorOptions{PID: l.PID, Ports: portsFromEnv(), Listen: func(context.Context, ListenSocket) error {
		called <- struct{}{}
		select {} // stalled for ever, deaf to the context too
	}})
	go func() { <-called; fmt.Println("called") }()
	fmt.Println("ready")
	_ = s.Run(context.Background())
	return 0
}

func portsFromEnv() []uint16 {
	p, _ := strconv.Atoi(os.Getenv("CG_PORT"))
	return []uint16{uint16(p)}
}

// supervised is a connector under Launch, driven through its stdin/stdout.
type supervised struct {
	t        testing.TB
	launcher *exec.Cmd
	sock     string
	prog     int // the program's pid (the connector under Launch)
	in       io.WriteCloser
	lines    chan string
}

func launchConnector(t testing.TB, env ...string) *supervised {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cg.sock")
	cmd := exec.Command(os.Args[0], "cg-launch", os.Args[0], "cg-connector")
	cmd.Env = append(os.Environ(), append(env, "CG_SOCK="+sock)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &supervised{t: t, launcher: cmd, sock: sock, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Signal(unix.SIGTERM)
		_ = cmd.Wait()
	})
	// The program's first line: it runs, so the launcher's socket exists.
	ready := p.line(30 * time.Second)
	if _, err := fmt.Sscanf(ready, "ready %d", &p.prog); err != nil {
		t.Fatalf("connector's first line %q, want ready PID", ready)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("launcher socket after the program started: %v", err)
	}
	return p
}

func (p *supervised) send(cmd string) {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		p.t.Fatal(err)
	}
}

func (p *supervised) line(timeout time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("connector exited")
		}
		return l
	case <-time.After(timeout):
		p.t.Fatalf("connector did not answer in %s", timeout)
	}
	return ""
}

func (p *supervised) connect(network, addr string) string {
	p.t.Helper()
	p.send("connect " + network + " " + addr)
	return p.line(60 * time.Second)
}
