//go:build linux

package rotatorkernel

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// kernelSession is a TCP-AO connection over loopback between a listener and
// a dialer in this process, with data flowing both ways until stop.
type kernelSession struct {
	srv, cli   *net.TCPConn
	srvS, cliS tcpao.Socket
	stop       context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	err        error
	bytes      int
}

func withKey(t *testing.T, k tcpao.Key) func(string, string, syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		if err := tcpao.New(rc).AddKey(k, tcpao.AddOptions{}); err != nil {
			return fmt.Errorf("add key before connect/listen: %w", err)
		}
		return nil
	}
}

func dialSession(t *testing.T, k tcpao.Key) *kernelSession {
	t.Helper()
	return dialSessionKeys(t, k, k)
}

// dialSessionKeys is dialSession with the listener holding lk (e.g. for a
// prefix) and the dialer ck.
func dialSessionKeys(t *testing.T, lk, ck tcpao.Key) *kernelSession {
	t.Helper()
	s := connectPair(t, lk, ck)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	// Client writes continuously; server echoes; client reads the echo.
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 256)
		for ctx.Err() == nil {
			if _, err := s.cli.Write(buf); err != nil {
				s.fail(fmt.Errorf("client write: %w", err))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		defer s.wg.Done()
		if _, err := io.Copy(s.srv, s.srv); err != nil && ctx.Err() == nil {
			s.fail(fmt.Errorf("server echo: %w", err))
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := s.cli.Read(buf)
			s.mu.Lock()
			s.bytes += n
			s.mu.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					s.fail(fmt.Errorf("client read: %w", err))
				}
				return
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

// dialQuiet is a session over which nothing is sent after the handshake
// (a BGP session between keepalives): only what the kernels send of
// themselves crosses it.
func dialQuiet(t *testing.T, k tcpao.Key) *kernelSession {
	t.Helper()
	s := connectPair(t, k, k)
	s.stop = func() {}
	t.Cleanup(s.close)
	return s
}

// connectPair connects a dialer holding ck to a listener holding lk over
// loopback.
func connectPair(t *testing.T, lk, ck tcpao.Key) *kernelSession {
	t.Helper()
	k := ck
	// Plain TCP both ends: an MPTCP socket (Go's listener default where
	// the kernel has CONFIG_MPTCP) refuses the keys, tcpao.ErrMPTCP.
	lc := net.ListenConfig{Control: withKey(t, lk)}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: withKey(t, k), Timeout: 10 * time.Second}
	d.SetMultipathTCP(false)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cli, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	s := &kernelSession{srv: srv.(*net.TCPConn), cli: cli.(*net.TCPConn)}
	rc1, _ := s.srv.SyscallConn()
	rc2, _ := s.cli.SyscallConn()
	s.srvS, s.cliS = tcpao.New(rc1), tcpao.New(rc2)
	return s
}

func (s *kernelSession) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *kernelSession) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Fatalf("connection broke: %v", s.err)
	}
}

func (s *kernelSession) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func (s *kernelSession) close() {
	s.stop()
	_ = s.cli.SetDeadline(time.Now())
	_ = s.srv.SetDeadline(time.Now())
	s.wg.Wait()
	s.cli.Close()
	s.srv.Close()
}

// rotators are a controller for each end of s with cfg, each wanting k
// and running the session's rotation: us the server's socket ("client",
// its peer), them the client's ("server"). They close when the test ends.
func (s *kernelSession) rotators(t *testing.T, cfg rotator.Config, k tcpao.Key) (us, them *rotator.Controller) {
	t.Helper()
	us, them = rotator.NewController(rotator.Options{Config: cfg}), rotator.NewController(rotator.Options{Config: cfg})
	t.Cleanup(func() { us.Close(); them.Close() })
	us.SetDesired(pid("client"), want(k))
	them.SetDesired(pid("server"), want(k))
	if _, err := us.Accepted(pid("client"), s.srvS); err != nil {
		t.Fatal(err)
	}
	if _, err := them.Accepted(pid("server"), s.cliS); err != nil {
		t.Fatal(err)
	}
	return us, them
}

func loKey(i int) tcpao.Key {
	id := uint8(i%200 + 1)
	k := mkKey("127.0.0.1/32", id, id, fmt.Sprintf("kernel-roll-%d", i))
	k.Algorithm = []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128}[i%3]
	return k
}

// waitFor waits for cond on real time (a real kernel's sockets), looking
// often: the rolls it waits for take milliseconds.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	err := lab.Poll{What: what, Timeout: limit, Every: 5 * time.Millisecond}.Wait(context.Background(), func() (bool, string, error) {
		return cond(), "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func statusOf(c *rotator.Controller, p rotator.PeerID) rotator.Status {
	for _, s := range c.Status() {
		if s.Peer == p {
			return s
		}
	}
	return rotator.Status{}
}

// TestKernelRollTwentyTimes: two sockets connected over loopback exchange
// data continuously while both sides' rotators roll the key 20 times. The
// connection never breaks, every roll ends with both sides sending with the
// new key and the old key deleted, and pkt_bad stays 0.
func TestKernelRollTwentyTimes(t *testing.T) {
	kerneltest.Require(t)
	s := dialSession(t, loKey(0))
	cfg := rotator.Config{SwitchTimeout: 30 * time.Second, Grace: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Backoff: time.Second}
	us, them := s.rotators(t, cfg, loKey(0))
	for i := 1; i <= 20; i++ {
		nk := loKey(i)
		us.SetDesired(pid("client"), want(nk))
		them.SetDesired(pid("server"), want(nk))
		waitFor(t, fmt.Sprintf("roll %d", i), 2*time.Minute, func() bool {
			s.check(t)
			return statusOf(us, pid("client")).Rolls == i && statusOf(them, pid("server")).Rolls == i
		})
		before := s.received()
		waitFor(t, "data after the roll", 30*time.Second, func() bool { s.check(t); return s.received() > before+4096 })
		for side, sock := range map[string]tcpao.Socket{"server": s.srvS, "client": s.cliS} {
			ks, err := sock.Keys(tcpao.KeyFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ks) != 1 || ks[0].SendID != nk.SendID || !ks[0].IsCurrent || !ks[0].IsRNext {
				t.Fatalf("roll %d: %s keys %+v, want only send=%d as current and rnext", i, side, ks, nk.SendID)
			}
			if ks[0].PktGood == 0 {
				t.Fatalf("roll %d: %s never verified a segment with the new key", i, side)
			}
			in, err := sock.Info()
			if err != nil {
				t.Fatal(err)
			}
			if in.PktBad != 0 || in.PktKeyNotFound != 0 {
				t.Fatalf("roll %d: %s pkt_bad=%d key_not_found=%d", i, side, in.PktBad, in.PktKeyNotFound)
			}
		}
		if a, b := statusOf(us, pid("client")).LastAbort, statusOf(them, pid("server")).LastAbort; a != "" || b != "" {
			t.Fatalf("roll %d aborted: %q / %q", i, a, b)
		}
		t.Logf("roll %d done: send=%d alg=%s, %d bytes echoed so far", i, nk.SendID, nk.Algorithm, s.received())
	}
	s.check(t)
}

// TestKernelPeerNeverGetsKey: one side never gets the new key. No switch
// happens, the connection survives, and the status says why.
func TestKernelPeerNeverGetsKey(t *testing.T) {
	kerneltest.Require(t)
	a, b := loKey(0), loKey(1)
	s := dialSession(t, a)
	cfg := rotator.Config{SwitchTimeout: 2 * time.Second, Grace: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Backoff: 500 * time.Millisecond, MaxBackoff: time.Second}
	us, _ := s.rotators(t, cfg, a)
	us.SetDesired(pid("client"), want(b)) // the other side never gets b
	waitFor(t, "two aborted attempts", 2*time.Minute, func() bool { s.check(t); return statusOf(us, pid("client")).Attempts >= 2 })
	st := statusOf(us, pid("client"))
	if !strings.Contains(st.LastAbort, fmt.Sprintf("did not send with key recv=%d", b.RecvID)) || st.Rolls != 0 {
		t.Fatalf("status does not say why: %+v", st)
	}
	before := s.received()
	waitFor(t, "data still flowing", 30*time.Second, func() bool { s.check(t); return s.received() > before+4096 })
	cur, err := s.srvS.Keys(tcpao.KeyFilter{Current: true})
	if err != nil || len(cur) != 1 || cur[0].SendID != a.SendID {
		t.Fatalf("server current %+v (%v), want the old key send=%d", cur, err, a.SendID)
	}
	for side, sock := range map[string]tcpao.Socket{"server": s.srvS, "client": s.cliS} {
		in, err := sock.Info()
		if err != nil {
			t.Fatal(err)
		}
		if in.PktBad != 0 || in.PktKeyNotFound != 0 {
			t.Fatalf("%s pkt_bad=%d key_not_found=%d", side, in.PktBad, in.PktKeyNotFound)
		}
	}
	t.Logf("status: %s; next %s", st.LastAbort, st.NextAction)
}

// TestKernelListenerSync: SyncListener rolls a listener's keys with
// del_async and the planner is idempotent on the real kernel.
func TestKernelListenerSync(t *testing.T) {
	kerneltest.Require(t)
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false) // an MPTCP listener refuses keys (tcpao.ErrMPTCP)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, _ := ln.(*net.TCPListener).SyscallConn()
	sock := tcpao.New(rc)
	d := rotator.Desired{Socket: "lis", Kind: rotator.Listening}
	for i := range 50 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32).String()
		d.Keys = append(d.Keys, dk(mkKey(p, 1, 1, "old")))
	}
	if _, err := rotator.SyncListener(sock, d, rotator.ListenerOptions{PeersPerBatch: 8}); err != nil {
		t.Fatal(err)
	}
	for i := range d.Keys {
		d.Keys[i] = dk(mkKey(d.Keys[i].Peer.String(), 2, 2, "new"))
	}
	sp, err := rotator.SyncListener(sock, d, rotator.ListenerOptions{PeersPerBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Ops) != 100 {
		t.Fatalf("%d ops, want 100", len(sp.Ops))
	}
	obs, err := rotator.Observe(sock, rotator.ReadFull)
	if err != nil {
		t.Fatal(err)
	}
	if again := rotator.PlanSocket(d, obs); !again.Empty() || len(obs.Keys) != 50 {
		t.Fatalf("not converged: %d keys, replan %v", len(obs.Keys), planText(again))
	}
	_, err = rotator.SyncListener(sock, rotator.Desired{Socket: "lis", Keys: d.Keys, AORequired: true}, rotator.ListenerOptions{OptMemMax: func() (int, error) { return 1000, nil }})
	if err == nil || !strings.Contains(err.Error(), "optmem_max") {
		t.Fatalf("err %v, want the optmem error", err)
	}
}
