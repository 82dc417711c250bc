//go:build linux

package activeopen

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
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

	"github.com/aokeyd/aokeyd/bgp"
	bgpgobgp "github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/kerneltest"
	"github.com/aokeyd/aokeyd/integration/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

var (
	addrA = netip.MustParseAddr("10.255.1.1")
	addrB = netip.MustParseAddr("10.255.1.2")
)

const bmpPort = 11019

// The MKT of the test (test-only secret); B's file is the mirror image.
const testSecret = "aokeyd-activeopen-test-key"

func keyFile(t *testing.T, dir, name string, peer netip.Addr, send, recv uint8) string {
	t.Helper()
	y := fmt.Sprintf(`chains:
  core:
    peers: [%s]
    keys:
      - name: k1
        send_id: %d
        recv_id: %d
        algorithm: hmac(sha256)
        secret_b64: %q
        send_lifetime: always
        accept_lifetime: always
`, peer, send, recv, base64.StdEncoding.EncodeToString([]byte(testSecret)))
	p := filepath.Join(dir, name+"-keys.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func gobgpdConfig(as, peerAS uint32, routerID, peer netip.Addr, passive bool, bmp netip.AddrPort) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n\n", as, routerID)
	if bmp.IsValid() {
		fmt.Fprintf(&b, "[[bmp-servers]]\n  [bmp-servers.config]\n    address = %q\n    port = %d\n\n", bmp.Addr(), bmp.Port())
	}
	fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", peer, peerAS)
	fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = %v\n", passive)
	b.WriteString("  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n    idle-hold-time-after-reset = 1\n")
	return b.String()
}

// router is one gobgpd under the launcher.
type router struct {
	name     string
	launcher *exec.Cmd
	sock     string // the launcher's listener socket
	pid      int    // gobgpd
	speaker  *bgpgobgp.Speaker
	dir      string
}

func findGobgpd(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AOKEYD_GOBGPD"); p != "" {
		return p
	}
	p, err := exec.LookPath("gobgpd")
	if err != nil {
		t.Fatal("gobgpd v3.37 not in PATH: put it in the guest with AOKEYD_GUEST_BINS (integration/tools/gobgpd.sh)")
	}
	return p
}

func logFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(path)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s:\n%s", filepath.Base(path), b)
		}
	})
	return f
}

// launch starts gobgpd through the launcher (in ns) and connects to its API.
func launch(t *testing.T, ns *netns.NS, name, conf string) *router {
	t.Helper()
	dir := t.TempDir()
	r := &router{name: name, dir: dir, sock: filepath.Join(dir, "guard.sock")}
	cfg := filepath.Join(dir, "gobgpd.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	api := "unix://" + filepath.Join(dir, "api.sock")
	log := logFile(t, filepath.Join(dir, name+"-gobgpd.log"))
	r.launcher = ns.Command(os.Args[0], "ao-launch", r.sock, findGobgpd(t), "-f", cfg, "-t", "toml",
		"--api-hosts", api, "--pprof-disable", "-l", "debug")
	r.launcher.Stdout, r.launcher.Stderr = log, log
	if err := r.launcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop() })
	r.pid = waitChild(t, r.launcher.Process.Pid)
	sp, closer, err := bgpgobgp.Dial(api, bgpgobgp.Options{
		Name: "gobgpd-" + name,
		PID:  func(context.Context) (int, error) { return r.pid, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	r.speaker = sp
	return r
}

func (r *router) stop() {
	if r.launcher.ProcessState != nil {
		return
	}
	_ = r.launcher.Process.Signal(unix.SIGTERM) // forwarded to gobgpd
	done := make(chan struct{})
	go func() { _ = r.launcher.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = r.launcher.Process.Kill()
		_ = unix.Kill(r.pid, unix.SIGKILL)
		<-done
	}
}

// waitChild returns the pid of the launcher's child once it runs gobgpd.
func waitChild(t *testing.T, launcher int) int {
	t.Helper()
	for i := 0; i < 600; i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", launcher))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", launcher, task.Name()))
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.HasSuffix(exe, "gobgpd") {
					return pid
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the launcher did not start gobgpd")
	return 0
}

// supervisor is one supervisor process (this binary, role ao-supervisor).
func startSupervisor(t *testing.T, r *router, keys, tag string) *exec.Cmd {
	t.Helper()
	log := logFile(t, filepath.Join(r.dir, r.name+"-supervisor-"+tag+".log"))
	cmd := exec.Command(os.Args[0], "ao-supervisor", r.sock, keys)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func waitPeer(t *testing.T, r *router, neighbor netip.Addr, timeout time.Duration, ok func(bgp.PeerInfo) bool) bgp.PeerInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last bgp.PeerInfo
	for time.Now().Before(deadline) {
		if ps, err := r.speaker.Peers(context.Background()); err == nil {
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
	t.Fatalf("%s: neighbor %s did not reach the wanted state in %s (last %+v)", r.name, neighbor, timeout, last)
	return last
}

func aoKey(peer netip.Addr, send, recv uint8) tcpao.Key {
	return tcpao.Key{
		KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(peer, 32), SendID: send, RecvID: recv},
		Algorithm: tcpao.HMACSHA256,
		Secret:    tcpao.NewSecret([]byte(testSecret)),
	}
}

// keyListener puts k on gobgpd's IPv4 listener (what the bgp issue's
// passive support does).
func keyListener(t *testing.T, r *router, k tcpao.Key) {
	t.Helper()
	defer k.Secret.Zero()
	var v4 sockets.Ref
	for i := 0; i < 200 && v4.Inode == 0; i++ {
		ls, _ := (sockets.Finder{PID: r.pid}).Listeners(179)
		for _, l := range ls {
			if l.Local.Addr().Is4() {
				v4 = l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v4.Inode == 0 {
		t.Fatalf("%s: gobgpd's IPv4 listener not found", r.name)
	}
	if err := sockets.WithSocket(v4, func(fd int) error { return tcpao.FromFD(fd).AddKey(k, tcpao.AddOptions{}) }); err != nil {
		t.Fatal(err)
	}
}

// session returns gobgpd's BGP connection to peer with its TCP-AO state.
func session(t *testing.T, r *router, peer netip.Addr) (sockets.Ref, []tcpao.KeyInfo, tcpao.Info) {
	t.Helper()
	var refs []sockets.Ref
	var err error
	for i := 0; i < 50; i++ {
		if refs, err = (sockets.Finder{PID: r.pid}).Connections(peer); err == nil && len(refs) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var bgpRef sockets.Ref
	for _, ref := range refs {
		if ref.Local.Port() == 179 || ref.Remote.Port() == 179 {
			bgpRef = ref
		}
	}
	if bgpRef.Inode == 0 {
		t.Fatalf("%s: no BGP connection to %s (%v, %v)", r.name, peer, refs, err)
	}
	var ks []tcpao.KeyInfo
	var info tcpao.Info
	if err := sockets.WithSocket(bgpRef, func(fd int) error {
		s := tcpao.FromFD(fd)
		var err error
		if ks, err = s.Keys(tcpao.KeyFilter{}); err != nil {
			return err
		}
		info, err = s.Info()
		return err
	}); err != nil {
		t.Fatalf("%s: TCP-AO state of %s: %v", r.name, bgpRef, err)
	}
	return bgpRef, ks, info
}

// checkAO checks both ends of the session: keys as configured, good packets
// only, and pkt_good rising over a keepalive interval.
func checkAO(t *testing.T, a, b *router, opener *router) {
	t.Helper()
	type end struct {
		r          *router
		peer       netip.Addr
		send, recv uint8
	}
	ends := []end{{a, addrB, 10, 20}, {b, addrA, 20, 10}}
	before := map[string]uint64{}
	for _, e := range ends {
		ref, ks, info := session(t, e.r, e.peer)
		if len(ks) != 1 || ks[0].SendID != e.send || ks[0].RecvID != e.recv || !ks[0].IsCurrent {
			t.Errorf("%s: keys on %s: %+v", e.r.name, ref, ks)
		}
		if info.PktGood == 0 || info.PktBad != 0 || info.PktKeyNotFound != 0 {
			t.Errorf("%s: counters on %s: %+v", e.r.name, ref, info)
		}
		if active := ref.Remote.Port() == 179; active != (e.r == opener) {
			t.Errorf("%s: connection %s: opened actively = %v, want %v", e.r.name, ref, active, e.r == opener)
		}
		before[e.r.name] = info.PktGood
		t.Logf("%s: %s keys %v pkt_good %d", e.r.name, ref, ks, info.PktGood)
	}
	time.Sleep(7 * time.Second) // two keepalives
	for _, e := range ends {
		_, _, info := session(t, e.r, e.peer)
		if info.PktGood <= before[e.r.name] {
			t.Errorf("%s: pkt_good %d -> %d, not rising", e.r.name, before[e.r.name], info.PktGood)
		}
	}
}

// connectWaiting reports whether a thread of pid sits in connect() waiting
// for the seccomp supervisor.
func connectWaiting(pid int) bool {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, task.Name()))
		if strings.HasPrefix(string(sc), strconv.Itoa(unix.SYS_CONNECT)+" ") && bytes.Contains(w, []byte("seccomp")) {
			return true
		}
	}
	return false
}

func TestGuestActiveOpen(t *testing.T) {
	kerneltest.Require(t)
	if ok, why := netns.Available(); !ok {
		t.Fatal(why)
	}
	nsA := netns.New(t, "aoact-a")
	nsB := netns.New(t, "aoact-b")
	netns.Link(t, nsA, "veth-a", addrA.String()+"/30", nsB, "veth-b", addrB.String()+"/30")
	dir := t.TempDir()
	keysA := keyFile(t, dir, "a", addrB, 10, 20)
	keysB := keyFile(t, dir, "b", addrA, 20, 10)

	// The BMP collector in B's namespace, up before gobgpd A starts.
	bmp := make(chan error, 1)
	var bmpLn net.Listener
	if err := nsB.Do(func() (err error) {
		bmpLn, err = net.Listen("tcp4", netip.AddrPortFrom(addrB, bmpPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer bmpLn.Close()
	go func() {
		c, err := bmpLn.Accept()
		if err != nil {
			bmp <- err
			return
		}
		defer c.Close()
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			bmp <- err
			return
		}
		_, ierr := tcpao.New(rc).Info()
		if ierr == nil {
			bmp <- errors.New("the BMP connection carries TCP-AO")
			return
		}
		if !errors.Is(ierr, syscall.ENOENT) {
			bmp <- ierr
			return
		}
		if from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); from != addrA {
			bmp <- fmt.Errorf("BMP connection from %s", from)
			return
		}
		bmp <- nil
	}()

	a := launch(t, nsA, "a", gobgpdConfig(65001, 65002, addrA, addrB, false, netip.AddrPortFrom(addrB, bmpPort)))
	b := launch(t, nsB, "b", gobgpdConfig(65002, 65001, addrB, addrA, false, netip.AddrPort{}))
	startSupervisor(t, a, keysA, "1")
	// Only A's listener has keys: the session can only come from B's
	// active open, which needs B's supervisor.
	keyListener(t, a, aoKey(addrB, 10, 20))

	t.Run("supervisor killed and restarted", func(t *testing.T) {
		sup := startSupervisor(t, b, keysB, "1")
		time.Sleep(time.Second)
		if err := sup.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = sup.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for !connectWaiting(b.pid) {
			if time.Now().After(deadline) {
				t.Fatal("gobgpd B has no connect waiting for a supervisor")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if ps, err := a.speaker.Peers(context.Background()); err != nil || len(ps) != 1 || ps[0].Established() {
			t.Fatalf("session state without B's supervisor: %+v %v", ps, err)
		}
		t.Log("gobgpd B's connect waits for a supervisor; starting one")
		restarted := time.Now()
		startSupervisor(t, b, keysB, "2")
		waitPeer(t, a, addrB, 90*time.Second, bgp.PeerInfo.Established)
		t.Logf("session up %s after the supervisor restart", time.Since(restarted).Round(time.Millisecond))
		if connectWaiting(b.pid) {
			t.Error("a connect of gobgpd B still waits after the restart")
		}
		checkAO(t, a, b, b)
	})

	t.Run("BMP connect continued without keys", func(t *testing.T) {
		select {
		case err := <-bmp:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("gobgpd A never connected to the BMP collector")
		}
	})

	t.Run("A opens actively", func(t *testing.T) {
		b.stop()
		b2 := launch(t, nsB, "b2", gobgpdConfig(65002, 65001, addrB, addrA, true, netip.AddrPort{}))
		b2.name = "b"
		startSupervisor(t, b2, keysB, "3")
		keyListener(t, b2, aoKey(addrA, 20, 10))
		waitPeer(t, a, addrB, 90*time.Second, bgp.PeerInfo.Established)
		checkAO(t, a, b2, a)
	})
}
