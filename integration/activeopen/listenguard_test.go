//go:build linux

package activeopen

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

var (
	guardA = netip.MustParseAddr("10.255.3.1") // gobgpd under aokeyd exec, with aokeyd
	guardB = netip.MustParseAddr("10.255.3.2") // its neighbor, and the prober
)

// synProbe sends unsigned SYNs from the neighbor's address to the other
// side's port 179 in a tight loop (each probe its own connect, one at a
// time on each of its goroutines) until stop, and counts how each ended.
type synProbe struct {
	ns       *netns.NS
	from, to netip.Addr

	mu                                sync.Mutex
	taken, refused, unanswered, other int
	firstTaken                        time.Time
	otherErr                          error
	stop                              chan struct{}
	wg                                sync.WaitGroup
}

func (p *synProbe) start(loops int) {
	p.stop = make(chan struct{})
	for range loops {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			// One namespace entry for the whole loop: every socket it
			// opens lives in the neighbor's namespace.
			_ = p.ns.Do(func() error {
				for {
					select {
					case <-p.stop:
						return nil
					default:
					}
					p.probe()
					time.Sleep(time.Millisecond)
				}
			})
		}()
	}
}

func (p *synProbe) probe() {
	d := net.Dialer{Timeout: 250 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: p.from.AsSlice()}}
	d.SetMultipathTCP(false)
	c, err := d.Dial("tcp4", netip.AddrPortFrom(p.to, 179).String())
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		c.Close()
		if p.taken == 0 {
			p.firstTaken = time.Now()
		}
		p.taken++
	case errors.Is(err, syscall.ECONNREFUSED):
		p.refused++ // nothing listens (yet): the SYN met a reset
	case lab.Unanswered(err):
		p.unanswered++ // a keyed listener dropped it
	default:
		p.other++
		p.otherErr = err
	}
}

func (p *synProbe) counts() (taken, refused, unanswered, other int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.taken, p.refused, p.unanswered, p.other
}

func (p *synProbe) halt() {
	close(p.stop)
	p.wg.Wait()
}

// TestGobgpdListenGuard proves the listen guard in the guest: gobgpd
// v3.37 under `aokeyd exec`, with aokeyd (-connectguard) whose key file
// has the key of its neighbor B, never takes an unsigned SYN from B's
// address. A prober in B's namespace sends them in a tight loop from
// before gobgpd starts until well after its listener exists: every one is
// refused (nothing listens: gobgpd's listen() is held until aokeyd keyed
// the socket) or unanswered (the keyed listener drops it), none is taken;
// aokeyd logs that it keyed the listener in its listen(), and the signed
// session with B comes up (gobgpd connects, keyed by aokeyd; B's listener
// has the mirror key). Without the guard the listener took unsigned SYNs
// for about a second after gobgpd's listen(), until aokeyd's listener
// watch found it.
func TestGobgpdListenGuard(t *testing.T) {
	kerneltest.Require(t)
	lab.RequireNetns(t)
	nsA, nsB := lab.Pair(t, netip.PrefixFrom(guardA, 30), netip.PrefixFrom(guardB, 30))
	dir := t.TempDir()

	// B: a plain gobgpd, passive, its listener keyed by hand with the
	// mirror of A's key (send 101, receive 1).
	b := lab.StartGobgpd(t, nsB, "b", lab.GobgpdConfig{AS: 65002, RouterID: guardB, LocalAddrs: []netip.Addr{guardB},
		Neighbors: []lab.Neighbor{{Addr: guardA, AS: 65001, Passive: true}}}, lab.GobgpdOptions{Dir: dir})
	mirror := aoKey(guardA, 101, 1)
	if err := sockets.WithSocket(b.ListenerV4(t), func(fd int) error { return tcpao.FromFD(fd).AddKey(mirror, tcpao.AddOptions{}) }); err != nil {
		t.Fatal(err)
	}
	mirror.Secret.Zero()

	// The probe can see a window: from B's address it is taken by a
	// listener in A's namespace that holds no key.
	var plain net.Listener
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	if err := nsA.Do(func() (err error) {
		plain, err = lc.Listen(context.Background(), "tcp4", guardA.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for c, err := plain.Accept(); err == nil; c, err = plain.Accept() {
			c.Close()
		}
	}()
	// A probe waits 300 ms for its SYN-ACK; the first between two fresh
	// namespaces also waits for ARP, which a busy guest can take past it
	// (CI on cd6b305): the control tries again, up to 30 s.
	port := uint16(plain.Addr().(*net.TCPAddr).Port)
	if err := lab.Within(30*time.Second, "an unsigned SYN from B taken by an unkeyed listener in A's namespace", func() (bool, string) {
		return lab.SYNTaken(nsB, guardB, guardA, port, ""), "not taken"
	}); err != nil {
		t.Fatalf("%v: the probe cannot see a window", err)
	}
	plain.Close()

	probe := &synProbe{ns: nsB, from: guardB, to: guardA}
	probe.start(2)
	stopped := false
	defer func() {
		if !stopped {
			probe.halt()
		}
	}()
	lab.Eventually(t, 30*time.Second, "the prober's first SYNs refused (nothing listens on A yet)", func() (bool, string) {
		taken, refused, unanswered, other := probe.counts()
		return refused > 0, fmt.Sprintf("taken %d refused %d unanswered %d other %d", taken, refused, unanswered, other)
	})

	// A: gobgpd under aokeyd exec (an active neighbor B), then aokeyd.
	aDir := filepath.Join(dir, "a")
	if err := os.MkdirAll(aDir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"keys.yaml": fmt.Sprintf("chains:\n  core:\n    peers: [%s]\n    keys:\n      - name: k1\n        send_id: 1\n        recv_id: 101\n        algorithm: hmac(sha256)\n        secret_b64: %q\n        send_lifetime: always\n        accept_lifetime: always\n",
			guardB, base64.StdEncoding.EncodeToString([]byte(testSecret))),
		"policy.yaml": fmt.Sprintf("version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: %s\n    key_chain: core\n", guardB),
		"aokeyd.yaml": fmt.Sprintf("key_source:\n  type: file\n  refresh: 1s\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\ngobgp:\n  address: %q\n  pid_file: gobgpd.pid\ncontrol:\n  socket: control.sock\nmetrics:\n  listen: \"off\"\nlog:\n  format: json\n  level: debug\n",
			"unix://"+filepath.Join(aDir, "gobgpd.sock")), // lab.StartGobgpd's API socket
	}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(aDir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	aLog := filepath.Join(aDir, "aokeyd.log")
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "A's aokeyd.log (tail)", lab.Tail(aLog, 20000))
		}
	})
	sock := filepath.Join(aDir, "cg.sock")
	started := time.Now()
	a := lab.StartGobgpd(t, nsA, "gobgpd", lab.GobgpdConfig{AS: 65001, RouterID: guardA, LocalAddrs: []netip.Addr{guardA},
		Neighbors: []lab.Neighbor{{Addr: guardB, AS: 65002}}},
		lab.GobgpdOptions{Dir: aDir, Launcher: []string{lab.MustBin(t, "aokeyd"), "exec", "-socket", sock, "--"}})
	ctl := control.NewClient(filepath.Join(aDir, "control.sock"), 10*time.Second)
	lab.StartAokeyd(t, nsA, aLog, ctl, "-config", filepath.Join(aDir, "aokeyd.yaml"), "-state-dir", filepath.Join(aDir, "state"),
		"-connectguard", sock)

	lab.WaitPeer(t, a.Speaker, guardB, 90*time.Second, bgp.PeerInfo.Established)
	up := time.Since(started)
	// Well after the listener exists: its keys read independently of
	// aokeyd, and more SYNs sent.
	v4 := a.ListenerV4(t)
	var lks []tcpao.KeyInfo
	if err := sockets.WithSocket(v4, func(fd int) error {
		var err error
		lks, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
		return err
	}); err != nil {
		t.Fatalf("A's listener %s: %v", v4, err)
	}
	if len(lks) != 1 || lks[0].SendID != 1 || lks[0].RecvID != 101 || lks[0].Peer != netip.PrefixFrom(guardB, 32) {
		t.Errorf("A's listener keys %+v, want B's key 1/101", lks)
	}
	time.Sleep(5 * time.Second)
	probe.halt()
	stopped = true

	taken, refused, unanswered, other := probe.counts()
	t.Logf("session up %s after gobgpd's start; unsigned SYNs from %s: taken %d, refused %d, unanswered %d, other %d (%v)",
		up.Round(time.Millisecond), guardB, taken, refused, unanswered, other, probe.otherErr)
	if taken != 0 {
		t.Errorf("A's listener took %d unsigned SYNs from its neighbor's address, the first %s after gobgpd's start",
			taken, probe.firstTaken.Sub(started).Round(time.Millisecond))
	}
	if unanswered == 0 {
		t.Error("no unsigned SYN met A's keyed listener: the probe did not cover the time it listened")
	}
	log, err := os.ReadFile(aLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "listener keyed in its listen()") {
		t.Error("aokeyd's log does not say it keyed gobgpd's listener in its listen()")
	}
	// The signed session: keys on A's socket, good segments only.
	ref, ks, info := session(t, &router{Gobgpd: a}, guardB)
	if len(ks) != 1 || ks[0].SendID != 1 || ks[0].RecvID != 101 || info.PktGood == 0 || info.PktBad != 0 {
		t.Errorf("A's session %s: keys %+v, counters %+v", ref, ks, info)
	}
}
