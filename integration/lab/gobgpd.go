package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/bgp"
	bgpgobgp "github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// GobgpdConfig is the part of gobgpd's TOML configuration the scenarios
// vary.
type GobgpdConfig struct {
	AS       uint32
	RouterID netip.Addr
	// LocalAddrs is the global local-address-list (empty: gobgpd listens
	// on every address).
	LocalAddrs []netip.Addr
	// BMP, when valid, is a BMP collector gobgpd connects to.
	BMP       netip.AddrPort
	Neighbors []Neighbor
	// HoldTime and Keepalive in seconds (defaults 9 and 3).
	HoldTime, Keepalive int
}

// Neighbor is one [[neighbors]] entry.
type Neighbor struct {
	Addr    netip.Addr
	AS      uint32
	Passive bool
	// Password is a TCP-MD5 password ("" for none).
	Password string
	// ConnectRetry is the neighbor's connect-retry in seconds (0: 1).
	// Two gobgpd ends that both connect actively can lock a link for
	// minutes: after a connection closed in OpenSent, gobgpd v3 holds the
	// neighbor Idle for 5 s (holdtimeIdle, not configurable) and closes
	// every connection that arrives meanwhile, then waits connect-retry
	// to connect-retry*2 in Active before it dials. Unequal values did
	// not prevent it (the fleet's g1-g2 and g4-g5 links in CI, 3 minutes
	// down each); make one end Passive where a test does not need both.
	ConnectRetry int
}

// TOML renders the configuration.
func (c GobgpdConfig) TOML() string {
	hold, ka := c.HoldTime, c.Keepalive
	if hold == 0 {
		hold = 9
	}
	if ka == 0 {
		ka = 3
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n", c.AS, c.RouterID)
	if len(c.LocalAddrs) > 0 {
		q := make([]string, len(c.LocalAddrs))
		for i, a := range c.LocalAddrs {
			q[i] = strconv.Quote(a.String())
		}
		fmt.Fprintf(&b, "  local-address-list = [%s]\n", strings.Join(q, ", "))
	}
	if c.BMP.IsValid() {
		fmt.Fprintf(&b, "\n[[bmp-servers]]\n  [bmp-servers.config]\n    address = %q\n    port = %d\n", c.BMP.Addr(), c.BMP.Port())
	}
	for _, n := range c.Neighbors {
		fmt.Fprintf(&b, "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", n.Addr, n.AS)
		if n.Password != "" {
			fmt.Fprintf(&b, "    auth-password = %q\n", n.Password)
		}
		fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = %v\n", n.Passive)
		retry := n.ConnectRetry
		if retry == 0 {
			retry = 1
		}
		fmt.Fprintf(&b, "  [neighbors.timers.config]\n    connect-retry = %d\n    hold-time = %d\n    keepalive-interval = %d\n    idle-hold-time-after-reset = 1\n", retry, hold, ka)
	}
	return b.String()
}

// GobgpdOptions vary how StartGobgpd runs gobgpd.
type GobgpdOptions struct {
	// Dir holds the configuration NAME.toml, the API socket NAME.sock, the
	// log NAME.log and the pid file NAME.pid (default: a new temporary
	// directory).
	Dir string
	// Debug runs gobgpd with -l debug.
	Debug bool
	// V4 runs gobgpd v4.8.0 (GobgpdV4Bin) instead of v3.37, and dials its
	// v4 API.
	V4 bool
	// Launcher, if set, is the command (and its arguments) that starts
	// gobgpd as its child, given gobgpd's command line after these: the
	// connectguard launcher or `aokeyd exec ... --`. Stop signals the
	// launcher, which forwards the signal to gobgpd.
	Launcher []string
	// MetricsHost, if set, is where gobgpd serves pprof and its
	// Prometheus metrics (--pprof-host; /metrics), e.g. its own count of
	// gRPC calls by method (grpc_server_started_total); unset, both are off.
	MetricsHost string
}

// Gobgpd is one running gobgpd in a namespace.
type Gobgpd struct {
	Name    string
	Dir     string
	API     string // unix://PATH of its gRPC API, reachable from any namespace
	PIDFile string
	Log     string // path of its log (the launcher's too, if any)
	Cmd     *exec.Cmd
	// PID is gobgpd's own pid (the launcher's child, with a launcher).
	PID     int
	Speaker *bgpgobgp.Speaker
	done    chan struct{}
}

// StartGobgpd runs gobgpd with conf in ns, waits for its API socket and
// dials it. gobgpd is stopped when the test ends.
func StartGobgpd(t testing.TB, ns *netns.NS, name string, conf GobgpdConfig, o GobgpdOptions) *Gobgpd {
	t.Helper()
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	g := &Gobgpd{Name: name, Dir: dir, Log: filepath.Join(dir, name+".log"), PIDFile: filepath.Join(dir, name+".pid"), done: make(chan struct{})}
	cfg := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(cfg, []byte(conf.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, name+".sock")
	_ = os.Remove(sock)
	g.API = "unix://" + sock
	bin, line := GobgpdBin, bgpgobgp.APIv3
	if o.V4 {
		bin, line = GobgpdV4Bin, bgpgobgp.APIv4
	}
	args := []string{bin(t), "-f", cfg, "-t", "toml", "--api-hosts", g.API, "--pprof-disable"}
	if o.MetricsHost != "" {
		args[len(args)-1] = "--pprof-host=" + o.MetricsHost
	}
	if o.Debug {
		args = append(args, "-l", "debug")
	}
	args = append(append([]string(nil), o.Launcher...), args...)
	log := LogFile(t, g.Log)
	g.Cmd = ns.Command(args[0], args[1:]...)
	g.Cmd.Env = NoMPTCP(os.Environ())
	g.Cmd.Stdout, g.Cmd.Stderr = log, log
	if err := g.Cmd.Start(); err != nil {
		t.Fatalf("gobgpd %s: %v", name, err)
	}
	go func() { _ = g.Cmd.Wait(); close(g.done) }()
	t.Cleanup(g.Stop)
	if len(o.Launcher) == 0 {
		g.PID = g.Cmd.Process.Pid // ip netns exec execs gobgpd in place
	} else {
		Eventually(t, ProcessStart, "gobgpd "+name+" started by "+filepath.Base(o.Launcher[0]), func() (bool, string) {
			g.PID = Child(g.Cmd.Process.Pid, filepath.Base(args[len(o.Launcher)])) // gobgpd or gobgpd-v4
			return g.PID != 0, "not yet"
		})
	}
	if err := os.WriteFile(g.PIDFile, []byte(strconv.Itoa(g.PID)), 0o644); err != nil {
		t.Fatal(err)
	}
	Eventually(t, ProcessStart, "gobgpd "+name+"'s API socket", func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	})
	sp, closer, err := bgpgobgp.Dial(g.API, bgpgobgp.Options{
		API:  line,
		Name: "gobgpd-" + name,
		PID:  func(context.Context) (int, error) { return g.PID, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	g.Speaker = sp
	return g
}

// NoMPTCP is env with multipathtcp=0 in GODEBUG (added to the settings
// there, or replacing a multipathtcp one), as gobgpd runs under
// deploy/debian/gobgpd-aokeyd.service: gobgpd v4.8 is built with go 1.25,
// and Go 1.24 and later listen with Multipath TCP by default where the
// kernel has CONFIG_MPTCP (Debian's does), and TCP-AO cannot be set on
// such a listener (tcpao.ErrMPTCP). A launcher (aokeyd exec) passes its
// environment on to gobgpd.
func NoMPTCP(env []string) []string {
	const set = "multipathtcp=0"
	out := slices.Clone(env)
	found := false
	for i, kv := range out {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		found = true
		var keep []string
		for _, s := range strings.Split(v, ",") {
			if s != "" && !strings.HasPrefix(s, "multipathtcp=") {
				keep = append(keep, s)
			}
		}
		out[i] = "GODEBUG=" + strings.Join(append(keep, set), ",")
	}
	if !found {
		out = append(out, "GODEBUG="+set)
	}
	return out
}

// Stop ends gobgpd: SIGTERM (through the launcher, if any), then SIGKILL
// after 20 s. It returns once the process it started has exited.
func (g *Gobgpd) Stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.Cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		g.Kill()
	}
}

// Kill ends gobgpd (and its launcher) with SIGKILL and waits for it.
func (g *Gobgpd) Kill() {
	_ = g.Cmd.Process.Kill()
	if g.PID != 0 && g.PID != g.Cmd.Process.Pid {
		_ = unix.Kill(g.PID, unix.SIGKILL)
	}
	<-g.done
}

// WaitPeer polls sp until its neighbor satisfies ok and returns it, failing
// the test after timeout with the last state seen.
func WaitPeer(t testing.TB, sp bgp.Speaker, neighbor netip.Addr, timeout time.Duration, ok func(bgp.PeerInfo) bool) bgp.PeerInfo {
	t.Helper()
	var last bgp.PeerInfo
	Eventually(t, timeout, fmt.Sprintf("%s: neighbor %s in the wanted state", sp.Name(), neighbor), func() (bool, string) {
		ps, err := sp.Peers(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.Neighbor == neighbor {
				last = p
				return ok(p), fmt.Sprintf("last %+v", p)
			}
		}
		return false, "no such neighbor"
	})
	return last
}

// Child returns the pid of a child of ppid (any of its threads') whose
// executable is named exe, or 0.
func Child(ppid int, exe string) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", ppid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(l) == exe {
				return pid
			}
		}
	}
	return 0
}

// ListenerV4 waits for gobgpd's IPv4 listening socket on port 179 (it
// appears once gobgpd has read its configuration) and returns it.
func (g *Gobgpd) ListenerV4(t testing.TB) sockets.Ref {
	t.Helper()
	var v4 sockets.Ref
	Eventually(t, ProcessStart, "gobgpd "+g.Name+"'s IPv4 listener on port 179", func() (bool, string) {
		ls, err := sockets.Finder{PID: g.PID}.Listeners(179)
		if err != nil {
			return false, err.Error()
		}
		for _, l := range ls {
			if l.Local.Addr().Is4() {
				v4 = l
				return true, ""
			}
		}
		return false, fmt.Sprintf("listeners %v", ls)
	})
	return v4
}
