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
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
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

// config is one router's gobgpd configuration: one neighbor, and a BMP
// collector if bmp is valid.
func config(as, peerAS uint32, routerID, peer netip.Addr, passive bool, bmp netip.AddrPort) lab.GobgpdConfig {
	return lab.GobgpdConfig{AS: as, RouterID: routerID, BMP: bmp,
		Neighbors: []lab.Neighbor{{Addr: peer, AS: peerAS, Passive: passive}}}
}

// router is one gobgpd under the connectguard launcher.
type router struct {
	*lab.Gobgpd
	sock string // the launcher's listener socket
}

// launch starts gobgpd through the launcher (in ns) and connects to its API.
func launch(t *testing.T, ns *netns.NS, name string, conf lab.GobgpdConfig) *router {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "guard.sock")
	g := lab.StartGobgpd(t, ns, name, conf, lab.GobgpdOptions{Dir: dir, Debug: true,
		Launcher: []string{os.Args[0], "ao-launch", sock}})
	return &router{Gobgpd: g, sock: sock}
}

// supervisor is one supervisor process (this binary, role ao-supervisor).
func startSupervisor(t *testing.T, r *router, keys, tag string) *exec.Cmd {
	t.Helper()
	log := lab.LogFile(t, filepath.Join(r.Dir, r.Name+"-supervisor-"+tag+".log"))
	cmd := exec.Command(os.Args[0], "ao-supervisor", r.sock, keys)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
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
	v4 := r.ListenerV4(t)
	if err := sockets.WithSocket(v4, func(fd int) error { return tcpao.FromFD(fd).AddKey(k, tcpao.AddOptions{}) }); err != nil {
		t.Fatal(err)
	}
}

// session returns gobgpd's BGP connection to peer with its TCP-AO state.
func session(t *testing.T, r *router, peer netip.Addr) (sockets.Ref, []tcpao.KeyInfo, tcpao.Info) {
	t.Helper()
	var refs []sockets.Ref
	var err error
	// The connection may still be being accepted.
	_ = lab.Within(5*time.Second, "a connection to "+peer.String(), func() (bool, string) {
		refs, err = sockets.Finder{PID: r.PID}.Connections(peer)
		return err == nil && len(refs) > 0, fmt.Sprint(refs, err)
	})
	var bgpRef sockets.Ref
	for _, ref := range refs {
		if ref.Local.Port() == 179 || ref.Remote.Port() == 179 {
			bgpRef = ref
		}
	}
	if bgpRef.Inode == 0 {
		t.Fatalf("%s: no BGP connection to %s (%v, %v)", r.Name, peer, refs, err)
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
		t.Fatalf("%s: TCP-AO state of %s: %v", r.Name, bgpRef, err)
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
			t.Errorf("%s: keys on %s: %+v", e.r.Name, ref, ks)
		}
		if info.PktGood == 0 || info.PktBad != 0 || info.PktKeyNotFound != 0 {
			t.Errorf("%s: counters on %s: %+v", e.r.Name, ref, info)
		}
		if active := ref.Remote.Port() == 179; active != (e.r == opener) {
			t.Errorf("%s: connection %s: opened actively = %v, want %v", e.r.Name, ref, active, e.r == opener)
		}
		before[e.r.Name] = info.PktGood
		t.Logf("%s: %s keys %v pkt_good %d", e.r.Name, ref, ks, info.PktGood)
	}
	time.Sleep(7 * time.Second) // two keepalives
	for _, e := range ends {
		_, _, info := session(t, e.r, e.peer)
		if info.PktGood <= before[e.r.Name] {
			t.Errorf("%s: pkt_good %d -> %d, not rising", e.r.Name, before[e.r.Name], info.PktGood)
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
	lab.RequireNetns(t)
	nsA, nsB := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
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

	a := launch(t, nsA, "a", config(65001, 65002, addrA, addrB, false, netip.AddrPortFrom(addrB, bmpPort)))
	b := launch(t, nsB, "b", config(65002, 65001, addrB, addrA, false, netip.AddrPort{}))
	startSupervisor(t, a, keysA, "1")

	t.Run("supervisor killed and restarted", func(t *testing.T) {
		sup := startSupervisor(t, b, keysB, "1")
		// gobgpd B's listens wait for a supervisor too (this one
		// continues them untouched: it has no Listen): its BGP listener
		// exists once this one answered, before it is killed.
		b.ListenerV4(t)
		time.Sleep(time.Second)
		if err := sup.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = sup.Wait()
		lab.Eventually(t, 60*time.Second, "a connect of gobgpd B waiting for a supervisor", func() (bool, string) {
			return connectWaiting(b.PID), "none waits"
		})
		if ps, err := a.Speaker.Peers(context.Background()); err != nil || len(ps) != 1 || ps[0].Established() {
			t.Fatalf("session state without B's supervisor: %+v %v", ps, err)
		}
		// Only now A's listener gets its key: the session can only come
		// from B's active open, which needs B's supervisor. (Keyed
		// earlier, B's first connect, keyed by the supervisor before it
		// was killed, could bring the session up and no connect would
		// wait.)
		keyListener(t, a, aoKey(addrB, 10, 20))
		t.Log("gobgpd B's connect waits for a supervisor; starting one")
		restarted := time.Now()
		startSupervisor(t, b, keysB, "2")
		lab.WaitPeer(t, a.Speaker, addrB, 90*time.Second, bgp.PeerInfo.Established)
		t.Logf("session up %s after the supervisor restart", time.Since(restarted).Round(time.Millisecond))
		if connectWaiting(b.PID) {
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
		b.Stop()
		b2 := launch(t, nsB, "b2", config(65002, 65001, addrB, addrA, true, netip.AddrPort{}))
		startSupervisor(t, b2, keysB, "3")
		keyListener(t, b2, aoKey(addrA, 20, 10))
		lab.WaitPeer(t, a.Speaker, addrB, 90*time.Second, bgp.PeerInfo.Established)
		checkAO(t, a, b2, a)
	})
}
