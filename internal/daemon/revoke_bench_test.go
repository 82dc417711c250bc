package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// BenchmarkRevoke is one global revoke of the fleet's Current_key (a backup
// present on every session: every socket gets a forced replace) across N
// established, steady sessions on the in-memory kernel (N:
// $AOKEYD_REVOKE_PEERS, default 256), timed from the Revoke call until it
// returns (every socket done), as revoke-ms, with the daemon's CPU time
// as cpu-ms. A synchronous TCP_AO_DEL_KEY on an established socket waits
// for an RCU grace period in the kernel (12 ms in the emulated guest, see
// the reference figures): the in-memory sockets sleep
// $AOKEYD_REVOKE_DEL_DELAY (default 12ms) in one, so the figure shows how
// the revoke overlaps them. borrows counts the borrows of the sockets'
// descriptors meanwhile (each a pidfd_getfd round trip in production; see
// slowDelSocket), the revoke's and the rotation machines' steps after it.
// Each iteration builds a fresh fleet (not timed). With
// $AOKEYD_REVOKE_PER_PEER=1 each peer has a binding of its own, as in the
// speaker bench, and the listener two keys a peer.
func BenchmarkRevoke(b *testing.B) {
	n := envPeers(b, "AOKEYD_REVOKE_PEERS", 256)
	perPeer := os.Getenv("AOKEYD_REVOKE_PER_PEER") == "1"
	delay := 12 * time.Millisecond
	if s := os.Getenv("AOKEYD_REVOKE_DEL_DELAY"); s != "" {
		var err error
		if delay, err = time.ParseDuration(s); err != nil || delay < 0 {
			b.Fatalf("AOKEYD_REVOKE_DEL_DELAY=%q: want a duration", s)
		}
	}
	var total, cpu time.Duration
	var borrows int64
	for range b.N {
		b.StopTimer()
		f := newRevokeFleet(b, fleetOptions{n: n, delay: delay, perPeer: perPeer})
		c0, b0 := cpuNow(b), f.borrows.Load()
		b.StartTimer()
		t0 := time.Now()
		res, err := f.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: f.k1.name})
		el := time.Since(t0)
		b.StopTimer()
		cpu += time.Duration(cpuNow(b) - c0)
		borrows += f.borrows.Load() - b0
		total += el
		if err != nil {
			b.Fatalf("Revoke: %v", err)
		}
		forced := 0
		for _, s := range res.Sockets {
			if s.Error != "" {
				b.Fatalf("revoke: socket %+v", s)
			}
			if s.Action == control.ActionForcedReplaced {
				forced++
			}
		}
		if forced != n {
			b.Fatalf("revoke: %d forced replaces, want %d: %+v", forced, n, res.Sockets)
		}
		for i, s := range f.socks {
			for _, k := range keyIDs(b, s) {
				if k == f.k1.ids() {
					b.Fatalf("peer %d still holds the revoked key after Revoke returned", i)
				}
			}
		}
		f.stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "revoke-ms")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms")
	b.ReportMetric(float64(borrows)/float64(b.N), "borrows")
	b.ReportMetric(0, "ns/op")
}

// revokeFleet is n steady sessions carrying k1 (Current_key) and k2 (the
// backup) under a running daemon.
type revokeFleet struct {
	d      *daemon.Daemon
	k1, k2 testKey
	socks  []*countingSocket
	addr   func(i int) netip.Addr // peer i's address
	// borrows counts the daemon's borrows of every socket's descriptor
	// (see slowDelSocket).
	borrows atomic.Int64
	stop    func()
	src     *fakeSource
	lis     tcpao.Socket // the listening socket, unwrapped
}

// slowDelSocket sleeps delay in every synchronous TCP_AO_DEL_KEY (the
// kernel's RCU grace period), as an established socket's does, and counts
// the borrows of the descriptor the daemon makes: each call on the socket
// is one, a BatchKeys call (bgp.AOSocket offers it) is one for all the
// calls it makes, as with the speaker's sockets in production, where a
// borrow is a pidfd_getfd round trip.
type slowDelSocket struct {
	tcpao.Socket
	delay   time.Duration
	borrows *atomic.Int64
}

func (s slowDelSocket) DelKey(d tcpao.DelKey) error {
	s.borrows.Add(1)
	return delSlow(s.Socket, d, s.delay)
}

func delSlow(s tcpao.Socket, d tcpao.DelKey, delay time.Duration) error {
	if !d.Async {
		time.Sleep(delay)
	}
	return s.DelKey(d)
}

func (s slowDelSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	s.borrows.Add(1)
	return s.Socket.AddKey(k, o)
}

func (s slowDelSocket) SetInfo(c tcpao.InfoChange) error {
	s.borrows.Add(1)
	return s.Socket.SetInfo(c)
}

func (s slowDelSocket) Info() (tcpao.Info, error) {
	s.borrows.Add(1)
	return s.Socket.Info()
}

func (s slowDelSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	s.borrows.Add(1)
	return s.Socket.Keys(f)
}

func (s slowDelSocket) BatchKeys(f func(tcpao.Socket) error) error {
	s.borrows.Add(1)
	return f(borrowed{s.Socket, s.delay})
}

// borrowed is the socket a BatchKeys call lends: its calls cost no borrow.
type borrowed struct {
	tcpao.Socket
	delay time.Duration
}

func (b borrowed) DelKey(d tcpao.DelKey) error { return delSlow(b.Socket, d, b.delay) }

// fleetOptions shape newRevokeFleet's fleet.
type fleetOptions struct {
	n     int
	delay time.Duration // slowDelSocket's
	// speaker, when set, wraps the scripted speaker the daemon is given
	// (a counting fake).
	speaker func(bgp.Speaker) bgp.Speaker
	// listener, when set, wraps the listening socket the daemon is given.
	listener func(tcpao.Socket) tcpao.Socket
	// session, when set, wraps each established socket inside its
	// borrow (the socket a BatchKeys call lends).
	session func(tcpao.Socket) tcpao.Socket
	// refresh is the key source's read interval (0: the default); each
	// read wakes a pass.
	refresh time.Duration
	// perPeer gives each peer a binding of its own (the speaker bench's
	// policy), so that the listener holds each key once per peer, instead
	// of one binding for the fleet's /16.
	perPeer bool
}

// newRevokeFleet builds the fleet; a test runs it in a synctest bubble,
// a benchmark outside one. b.Cleanup stops it where the caller does not.
func newRevokeFleet(b testing.TB, o fleetOptions) *revokeFleet {
	b.Helper()
	n, delay := o.n, o.delay
	now := time.Now()
	f := &revokeFleet{
		k1: testKey{name: "k1", send: 20, recv: 21, secret: "revoke-bench-secret-k1-Qe3", sendStart: now.Add(-time.Hour)},
		k2: testKey{name: "k2", send: 30, recv: 31, secret: "revoke-bench-secret-k2-Tn8", sendStart: now.Add(-2 * time.Hour)},
	}
	var infos []bgp.PeerInfo
	for i := range n {
		infos = append(infos, passivePeer(i))
	}
	pol := "version: 1\nsafety:\n  switch_timeout: 5m\n  on_revoke_only_key: keep\nkey_chains:\n  - name: core\npeers:\n"
	if o.perPeer {
		for i := range n {
			pol += fmt.Sprintf("  - neighbor: %s\n    key_chain: core\n", fleetPeer(i))
		}
	} else {
		pol += "  - neighbor: 10.1.0.0/16\n    key_chain: core\n"
	}
	src := &fakeSource{}
	m1, m2 := f.k1.mkt(), f.k2.mkt()
	src.setKeys(m1, m2)
	m1.Zero()
	m2.Zero()
	sp := bgptest.NewSpeaker("revoke-speaker", speakerPID, n, infos...)
	var speaker bgp.Speaker = sp
	if o.speaker != nil {
		speaker = o.speaker(sp)
	}
	// optmem_max as aokeyd's kernel.raise_optmem leaves it for a listener
	// with a fleet's keys.
	net, disc := tcpaotest.NewNet(tcpaotest.WithOptMemMax(1<<30)), newFakeDiscoverer()
	lis, _ := listenOn(b, net, disc)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	var estMu sync.Mutex
	established := map[uint64]bool{}
	socketOf := func(h bgp.SocketHandle) tcpao.Socket {
		s := disc.socketOf(h)
		estMu.Lock()
		est := established[h.Ref().Inode]
		estMu.Unlock()
		if est {
			if o.session != nil {
				s = o.session(s)
			}
			return slowDelSocket{s, delay, &f.borrows}
		}
		var ls tcpao.Socket = slowDelSocket{s, 0, &f.borrows} // the listener
		if o.listener != nil {
			ls = o.listener(ls)
		}
		return ls
	}
	d, err := daemon.New(daemon.Options{
		Policy: parsePolicy(b, pol), Keys: cache, Source: src, Speaker: speaker, Discoverer: disc, ListenPort: bgpPort,
		Rotator: rotator.Config{Grace: 20 * time.Millisecond, Poll: 10 * time.Millisecond},
		Resync:  time.Hour, Refresh: o.refresh, OptMemMax: func() (int, error) { return 1 << 30, nil },
		Logger: slog.New(slog.DiscardHandler), SocketOf: socketOf,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	f.d, f.addr, f.src, f.lis = d, fleetPeer, src, lis
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Errorf("Run: %v", err)
			}
			cache.Close()
			src.close()
		})
	}
	b.Cleanup(f.stop)
	waitFor := func(what string, cond func() bool) {
		b.Helper()
		for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("not within 5m: %s", what)
			}
		}
	}
	lisKeys := 2
	if o.perPeer {
		lisKeys = 2 * n
	}
	waitFor("the listener's keys", func() bool { c, _ := lis.Keys(tcpao.KeyFilter{}); return len(c) == lisKeys })
	f.socks = make([]*countingSocket, n)
	for i := range n {
		client, err := net.Socket(fleetPeer(i))
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range []testKey{f.k2, f.k1} { // k1 last: the client's current key
			mk := k.mirror()
			if err := client.AddKey(mk, tcpao.AddOptions{}); err != nil {
				b.Fatal(err)
			}
			mk.Secret.Zero()
		}
		acc, err := net.Connect(client, lis)
		if err != nil {
			b.Fatalf("connect %s: %v", fleetPeer(i), err)
		}
		f.socks[i] = disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), client.LocalAddr(), false)
		ref, err := disc.Established(speakerPID, netip.AddrPortFrom(localAddr, bgpPort), client.LocalAddr())
		if err != nil {
			b.Fatal(err)
		}
		estMu.Lock()
		established[ref.Inode] = true
		estMu.Unlock()
		sp.Set(bgp.PeerInfo{Neighbor: fleetPeer(i), Local: localAddr, LocalPort: bgpPort, RemotePort: client.LocalAddr().Port(),
			State: bgp.StateEstablished, Uptime: now.Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
	}
	want := fmt.Sprint([]string{f.k1.ids(), f.k2.ids()})
	waitFor(fmt.Sprintf("%d sessions steady with both keys, k1 current", n), func() bool {
		rep, err := d.Status(context.Background(), "")
		if err != nil || len(rep.Peers) != n {
			return false
		}
		for _, p := range rep.Peers {
			if p.Rotation.State != string(rotator.StateSteady) {
				return false
			}
		}
		for _, s := range f.socks {
			in, err := s.Info()
			if err != nil || fmt.Sprint(keyIDs(b, s)) != want || in.CurrentKey != f.k1.send {
				return false
			}
		}
		return true
	})
	return f
}
