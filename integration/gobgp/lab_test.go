package gobgp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	bgpgobgp "github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

var (
	addrA = netip.MustParseAddr("10.255.0.1")
	addrB = netip.MustParseAddr("10.255.0.2")
)

// findGobgpd returns the gobgpd binary or skips.
func findGobgpd(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AOKEYD_GOBGPD"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	if p := filepath.Join(cache, "aokeyd", "bin", "gobgpd"); isExec(p) {
		return p
	}
	if p, err := exec.LookPath("gobgpd"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		out, err := exec.Command("bash", "../tools/gobgpd.sh").Output()
		if err != nil {
			t.Fatalf("installing gobgpd with integration/tools/gobgpd.sh: %v", err)
		}
		return filepath.Join(strings.TrimSpace(string(out)), "gobgpd")
	}
	t.Skip("gobgpd v3.37 not found: run integration/tools/gobgpd.sh (or set AOKEYD_GOBGPD)")
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// requireNetns skips unless the test can create network namespaces.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// lab is two network namespaces joined by a veth pair.
type lab struct {
	nsA, nsB string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{nsA: fmt.Sprintf("aokeyd-t-%d-a", os.Getpid()), nsB: fmt.Sprintf("aokeyd-t-%d-b", os.Getpid())}
	for _, ns := range []string{l.nsA, l.nsB} {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", l.nsA, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b", "netns", l.nsB)
	run(t, "ip", "-n", l.nsA, "addr", "add", addrA.String()+"/30", "dev", "veth-a")
	run(t, "ip", "-n", l.nsB, "addr", "add", addrB.String()+"/30", "dev", "veth-b")
	run(t, "ip", "-n", l.nsA, "link", "set", "veth-a", "up")
	run(t, "ip", "-n", l.nsB, "link", "set", "veth-b", "up")
	return l
}

// gobgpd is one running gobgpd.
type gobgpd struct {
	cmd     *exec.Cmd
	pid     int
	api     string
	log     *bytes.Buffer
	speaker *bgpgobgp.Speaker
}

type neighborConf struct {
	addr     netip.Addr
	as       uint32
	passive  bool
	password string
}

func gobgpdConfig(as uint32, routerID netip.Addr, n neighborConf) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n\n", as, routerID)
	fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", n.addr, n.as)
	if n.password != "" {
		fmt.Fprintf(&b, "    auth-password = %q\n", n.password)
	}
	fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = %v\n", n.passive)
	b.WriteString("  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n    idle-hold-time-after-reset = 1\n")
	return b.String()
}

// startGobgpd runs gobgpd in netns ns with the given config and its API on
// a unix socket (reachable from any namespace).
func startGobgpd(t *testing.T, bin, ns, name, conf string) *gobgpd {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, name+".sock")
	g := &gobgpd{api: "unix://" + sock, log: &bytes.Buffer{}}
	g.cmd = exec.Command("ip", "netns", "exec", ns, bin, "-f", cfg, "-t", "toml", "--api-hosts", g.api, "--pprof-disable", "-p", "-l", "debug")
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.pid = g.cmd.Process.Pid // ip netns exec execs gobgpd in place
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		if t.Failed() {
			t.Logf("gobgpd %s log:\n%s", name, tail(g.log.String(), 4000))
		}
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 200 {
			t.Fatalf("gobgpd %s: API socket %s did not appear\n%s", name, sock, g.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sp, closer, err := bgpgobgp.Dial(g.api, bgpgobgp.Options{
		Name: "gobgpd-" + name,
		PID:  func(context.Context) (int, error) { return g.pid, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	g.speaker = sp
	return g
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// waitPeer polls the speaker until neighbor satisfies ok.
func waitPeer(t *testing.T, sp bgp.Speaker, neighbor netip.Addr, timeout time.Duration, ok func(bgp.PeerInfo) bool) bgp.PeerInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last bgp.PeerInfo
	for time.Now().Before(deadline) {
		ps, err := sp.Peers(context.Background())
		if err == nil {
			for _, p := range ps {
				if p.Neighbor == neighbor {
					last = p
					if ok(p) {
						return p
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: neighbor %s did not reach the wanted state in %s (last %+v)", sp.Name(), neighbor, timeout, last)
	return last
}

// dialFrom connects to dst from inside the network namespace of pid; control
// runs on the socket before connect (e.g. to set keys).
func dialFrom(pid int, dst netip.AddrPort, timeout time.Duration, control func(fd int) error) (net.Conn, error) {
	var c net.Conn
	err := sockets.InNetNS(pid, func() error {
		d := net.Dialer{Timeout: timeout}
		if control != nil {
			d.ControlContext = func(_ context.Context, _, _ string, rc syscall.RawConn) error {
				var cerr error
				if err := rc.Control(func(fd uintptr) { cerr = control(int(fd)) }); err != nil {
					return err
				}
				return cerr
			}
		}
		var err error
		c, err = d.Dial("tcp4", dst.String())
		return err
	})
	return c, err
}

// observer records what a Tracker hands over.
type observer struct {
	up   chan upEvent
	down chan bgp.PeerInfo
}

type upEvent struct {
	peer bgp.PeerInfo
	sock bgp.SocketHandle
}

func newObserver() *observer {
	return &observer{up: make(chan upEvent, 8), down: make(chan bgp.PeerInfo, 8)}
}

func (o *observer) OnEstablished(_ context.Context, p bgp.PeerInfo, s bgp.SocketHandle) {
	o.up <- upEvent{p, s}
}
func (o *observer) OnDown(_ context.Context, p bgp.PeerInfo) { o.down <- p }

func waitUp(t *testing.T, o *observer, timeout time.Duration) upEvent {
	t.Helper()
	select {
	case e := <-o.up:
		return e
	case <-time.After(timeout):
		t.Fatalf("tracker reported no established session in %s", timeout)
	}
	return upEvent{}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF)
}

// nsHolder starts a process that sits in netns ns (for entering it by pid).
func nsHolder(t *testing.T, ns string) int {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait until it has entered the namespace (ip execs sleep there).
	for i := 0; i < 100; i++ {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); err == nil && strings.HasSuffix(l, "sleep") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd.Process.Pid
}
