package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
	"golang.org/x/sys/unix"
)

// threadCPU is the calling OS thread's user+system CPU time in ns.
func threadCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFleetRoll is the CPU time of one scheduled roll of N peers, all
// due at one instant, on this machine's CPU and the in-memory kernel (N:
// $AOKEYD_ROLL_PEERS, default 256): the host model of the real-speaker
// bench (integration/speakerbench), with its shape: one policy binding per
// peer, the chain's keys for the peers' /16, keys k1 (sending until the
// roll, accepted a second longer), k2 (from the roll) and k3 (a backup),
// the lab's roll timers (grace 2 s, counters every 250 ms), JSON logs at
// info level, and a far side that asks for k2 ahead of the roll and sends
// a keepalive on each session every $AOKEYD_ROLL_KEEPALIVE (default the
// speaker bench's: 1 s up to 256 peers, N/128 s above, so 8 s at 1,024;
// a rotation machine waits on the peer's segments, so its polls per roll
// grow with this interval).
//
// It reports, per roll: cpu-ms (the process's CPU from the key change to
// the last peer done), idle-cpu-ms (the same span of steady state, with the
// same keepalives, measured before: the part that is not the roll's),
// roll-cpu-ms (their difference; the bench's own keepalives and socket
// reads run on locked threads whose CPU is left out of both), last-done-ms (key change to the last peer
// with k1 gone from its socket and the listener and k2 current) and
// speaker-queries/peer, socket-reads/peer and socket-writes/peer (aokeyd's
// kernel calls on the sessions and the listener over the roll) and
// borrows/peer (the pidfd_getfd borrows of the speaker's descriptors they
// cost on a real kernel: bgp's AOSocket borrows once per call, or once per
// BatchKeys where it offers that), roll-cpu-ms/peer, fingerprints/peer
// (the keys its fingerprinted reads returned, sessions and listener, but
// those holding a secret the read named (tcpao.Known): on a real kernel
// one HMAC each; the in-memory kernel computes none) and
// listener-fingerprints/peer (the listener's part), and full-passes (the
// reconcile passes over the roll). $AOKEYD_ROLL_PROFILE names a CPU profile file of
// the roll span.
func BenchmarkFleetRoll(b *testing.B) {
	n := envPeers(b, "AOKEYD_ROLL_PEERS", 256)
	for range b.N {
		r := fleetRoll(b, n)
		b.ReportMetric(r.cpu, "cpu-ms")
		b.ReportMetric(r.idle, "idle-cpu-ms")
		b.ReportMetric(r.cpu-r.idle, "roll-cpu-ms")
		b.ReportMetric(r.lastDone, "last-done-ms")
		b.ReportMetric(r.queries/float64(n), "speaker-queries/peer")
		b.ReportMetric(r.reads/float64(n), "socket-reads/peer")
		b.ReportMetric(r.writes/float64(n), "socket-writes/peer")
		b.ReportMetric(r.borrows/float64(n), "borrows/peer")
		b.ReportMetric((r.cpu-r.idle)/float64(n), "roll-cpu-ms/peer")
		b.ReportMetric(r.fps/float64(n), "fingerprints/peer")
		b.ReportMetric(r.lisFps/float64(n), "listener-fingerprints/peer")
		b.ReportMetric(r.passes, "full-passes")
	}
	b.ReportMetric(0, "ns/op")
}

type fleetRollResult struct {
	cpu, idle, lastDone, queries, reads, writes, borrows float64
	fps, lisFps, passes                                  float64
}

// borrowCounting wraps the sockets the daemon gets with a count of the
// borrows of the speaker's descriptor they would cost on a real kernel (bgp's
// AOSocket: one pidfd_getfd per call, or per BatchKeys when it offers that).
func borrowCounting(of func(bgp.SocketHandle) tcpao.Socket, n *atomic.Int64) func(bgp.SocketHandle) tcpao.Socket {
	_, batches := bgp.AOSocket(nil).(interface {
		BatchKeys(func(tcpao.Socket) error) error
	})
	return func(h bgp.SocketHandle) tcpao.Socket {
		s := borrowingSocket{s: of(h), n: n}
		if batches {
			return batchingSocket{s}
		}
		return s
	}
}

type borrowingSocket struct {
	s tcpao.Socket
	n *atomic.Int64
}

func (b borrowingSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	b.n.Add(1)
	return b.s.AddKey(k, o)
}
func (b borrowingSocket) DelKey(d tcpao.DelKey) error { b.n.Add(1); return b.s.DelKey(d) }
func (b borrowingSocket) Info() (tcpao.Info, error)   { b.n.Add(1); return b.s.Info() }
func (b borrowingSocket) SetInfo(c tcpao.InfoChange) error {
	b.n.Add(1)
	return b.s.SetInfo(c)
}
func (b borrowingSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	b.n.Add(1)
	return b.s.Keys(f)
}

func (b borrowingSocket) ArmPeerProbe() (tcpao.PeerProbe, error) {
	b.n.Add(1)
	return tcpao.ArmPeerProbe(b.s)
}

func (b borrowingSocket) EndPeerProbe(p tcpao.PeerProbe) error {
	b.n.Add(1)
	return tcpao.EndPeerProbe(b.s, p)
}

type batchingSocket struct{ borrowingSocket }

func (b batchingSocket) BatchKeys(f func(tcpao.Socket) error) error {
	b.n.Add(1)
	return f(b.s)
}

const (
	rollGrace = 2 * time.Second
	rollPoll  = 250 * time.Millisecond
)

// rollKeepalive is the far side's keepalive interval at n peers: the
// speaker bench's (integration/speakerbench keepalive: 1 s up to 256
// peers, n/128 s rounded up above), or $AOKEYD_ROLL_KEEPALIVE.
func rollKeepalive(b *testing.B, n int) time.Duration {
	if s := os.Getenv("AOKEYD_ROLL_KEEPALIVE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("AOKEYD_ROLL_KEEPALIVE=%q: want a duration", s)
		}
		return d
	}
	if n <= 256 {
		return time.Second
	}
	return time.Duration((n+127)/128) * time.Second
}

func fleetRoll(b *testing.B, n int) fleetRollResult {
	b.StopTimer()
	now := time.Now()
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	peer := fleetPeer
	keyAt := func(i int, sendStart, sendEnd, acceptStart, acceptEnd time.Time) keystore.MKT {
		k := testKey{name: fmt.Sprintf("k%d", i), send: uint8(i), recv: uint8(100 + i), secret: fmt.Sprintf("fleet-roll-bench-secret-k%d", i)}
		m := k.mkt()
		m.Peers = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
		m.SendLifetime = keystore.Lifetime{Start: sendStart, End: sendEnd}
		m.AcceptLifetime = keystore.Lifetime{Start: acceptStart, End: acceptEnd}
		return m
	}
	// keysRolling as in integration/speakerbench: k1 sends until at (and is
	// accepted a second longer), k2 from at, k3 the backup.
	keysRolling := func(at time.Time) []keystore.MKT {
		return []keystore.MKT{
			keyAt(1, now.Add(-time.Hour), at, time.Time{}, at.Add(time.Second)),
			keyAt(2, at, time.Time{}, at, time.Time{}),
			keyAt(3, now.Add(-2*time.Hour), time.Time{}, time.Time{}, time.Time{}),
		}
	}
	var pol strings.Builder
	pol.WriteString("version: 1\nsafety:\n  switch_timeout: 15s\n  on_switch_timeout: retry\n  retry_after: 2s\nkey_chains:\n  - name: core\npeers:\n")
	var infos []bgp.PeerInfo
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: core\n", peer(i))
		infos = append(infos, passivePeer(i))
	}
	src := &fakeSource{}
	b.Cleanup(src.close)
	setKeys := func(ks []keystore.MKT) {
		src.setKeys(ks...)
		for _, k := range ks {
			k.Zero()
		}
	}
	setKeys(keysRolling(far))
	sp := bgptest.NewSpeaker("roll-speaker", speakerPID, n, infos...)
	// optmem_max as aokeyd's kernel.raise_optmem leaves it for the listener.
	net, disc := tcpaotest.NewNet(tcpaotest.WithOptMemMax(1<<30)), newFakeDiscoverer()
	lis, lisC := listenOn(b, net, disc)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	b.Cleanup(cache.Close)
	var borrows atomic.Int64
	d, err := daemon.New(daemon.Options{
		Policy: parsePolicy(b, pol.String()), Keys: cache, Source: src, Speaker: sp, Discoverer: disc, ListenPort: bgpPort,
		Rotator: rotator.Config{SwitchTimeout: 15 * time.Second, Grace: rollGrace, Poll: rollPoll, Backoff: 2 * time.Second},
		Resync:  time.Hour, Refresh: time.Second, OptMemMax: func() (int, error) { return 1 << 30, nil },
		Logger:   slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		SocketOf: borrowCounting(disc.socketOf, &borrows),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	var diag func() string
	var pollCPU int64 // the bench's own reads of the sockets (not aokeyd's)
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		b.Helper()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		check := func() bool {
			c := threadCPU(b)
			defer func() { pollCPU += threadCPU(b) - c }()
			return cond()
		}
		for deadline := time.Now().Add(limit); !check(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				msg := ""
				if diag != nil {
					msg = diag()
				}
				b.Fatalf("not within %v: %s; %s", limit, what, msg)
			}
		}
	}
	// lisIDs is each peer's listener keys, bit i for SendID i: one map,
	// so that the roll's checks make little garbage (the collector's
	// work for the bench's garbage would count as aokeyd's CPU).
	lisIDs := func() map[netip.Addr]uint8 {
		ks, _ := lis.Keys(tcpao.KeyFilter{SkipFingerprint: true})
		m := make(map[netip.Addr]uint8, n)
		for _, k := range ks {
			m[k.Peer.Addr()] |= 1 << k.SendID
		}
		return m
	}
	waitFor("the listener's keys", time.Minute, func() bool { return len(lisIDs()) == n })
	clients, accs := make([]*tcpaotest.Sock, n), make([]*tcpaotest.Sock, n)
	counted := make([]*countingSocket, n)
	for i := range n {
		c, err := net.Socket(peer(i + 1))
		if err != nil {
			b.Fatal(err)
		}
		// The far side holds k1, k2 and k3; it sends with k1 and asks for
		// k2 (RNext) ahead of the roll, as the bench's armed BIRD does.
		for _, j := range []int{3, 2, 1} {
			k := tcpao.Key{KeyRef: tcpao.KeyRef{Peer: netip.PrefixFrom(localAddr, 32), SendID: uint8(100 + j), RecvID: uint8(j)},
				Algorithm: tcpao.HMACSHA256, MACLen: 12, Secret: tcpao.NewSecret([]byte(fmt.Sprintf("fleet-roll-bench-secret-k%d", j)))}
			if err := c.AddKey(k, tcpao.AddOptions{}); err != nil {
				b.Fatal(err)
			}
			k.Secret.Zero()
		}
		acc, err := net.Connect(c, lis)
		if err != nil {
			b.Fatalf("connect %s: %v", peer(i+1), err)
		}
		rn := uint8(2)
		if err := c.SetInfo(tcpao.InfoChange{RNext: &rn}); err != nil {
			b.Fatal(err)
		}
		clients[i], accs[i] = c, acc
		counted[i] = disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), c.LocalAddr(), false)
		sp.Set(bgp.PeerInfo{Neighbor: peer(i + 1), Local: localAddr, LocalPort: bgpPort, RemotePort: c.LocalAddr().Port(),
			State: bgp.StateEstablished, Uptime: now.Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
	}
	// Keepalives: one segment each way on every session every ka.
	ka := rollKeepalive(b, n)
	tctx, tstop := context.WithCancel(context.Background())
	tdone := make(chan struct{})
	var kaCPU atomic.Int64 // the keepalives' own CPU (not aokeyd's)
	go func() {
		defer close(tdone)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tick := time.NewTicker(ka)
		defer tick.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-tick.C:
			}
			c := threadCPU(b)
			for i := range accs {
				_ = net.Exchange(accs[i], clients[i], 1)
			}
			kaCPU.Add(threadCPU(b) - c)
		}
	}()
	defer func() { tstop(); <-tdone }()
	carries := func(i int, cur uint8, want ...uint8) bool {
		in, err := accs[i].Info()
		if err != nil || !in.HaveCurrent || in.CurrentKey != cur {
			return false
		}
		ks, _ := accs[i].Keys(tcpao.KeyFilter{})
		if len(ks) != len(want) {
			return false
		}
		for _, w := range want {
			found := false
			for _, k := range ks {
				found = found || k.SendID == w
			}
			if !found {
				return false
			}
		}
		return true
	}
	waitFor(fmt.Sprintf("%d sessions on k1 with k1 and k3", n), 5*time.Minute, func() bool {
		for i := range n {
			if !carries(i, 1, 1, 3) {
				return false
			}
		}
		return true
	})
	// The roll's instant, and a window of steady state of the same length
	// as the roll is expected to take, for the idle figure.
	idleWindow := max(rollGrace+2*time.Second, 2*ka)
	at := time.Now().Add(idleWindow + 2*time.Second).Truncate(100 * time.Millisecond)
	setKeys(keysRolling(at))
	d.Kick() // the key source's read, as a refresh would
	time.Sleep(500 * time.Millisecond)
	time.Sleep(time.Until(at.Add(-idleWindow - 100*time.Millisecond)))
	c0, ka0 := cpuNow(b), kaCPU.Load()
	time.Sleep(idleWindow)
	idle := cpuNow(b) - c0 - (kaCPU.Load() - ka0)
	q0 := sp.Queries()
	calls := func() (r, w int, bw int64) {
		for _, c := range append(counted, lisC) {
			cr, cw := c.calls()
			r, w = r+cr, w+cw
		}
		return r, w, borrows.Load()
	}
	r0, w0, bw0 := calls()
	fingerprints := func() (all, lis int) {
		for _, c := range append(counted, lisC) {
			all += c.fingerprints()
		}
		return all, lisC.fingerprints()
	}
	fp0, lfp0 := fingerprints()
	_, full0 := d.Passes()
	time.Sleep(time.Until(at))
	defer cpuProfile(b, "AOKEYD_ROLL_PROFILE")()
	b.StartTimer()
	c1, ka1, p1 := cpuNow(b), kaCPU.Load(), pollCPU
	pending := map[int]bool{}
	for i := range n {
		pending[i] = true
	}
	var last time.Duration
	diag = func() string {
		for i := range pending {
			in, _ := accs[i].Info()
			ks, _ := accs[i].Keys(tcpao.KeyFilter{})
			var ids []string
			for _, k := range ks {
				ids = append(ids, fmt.Sprintf("%d/%d good=%d", k.SendID, k.RecvID, k.PktGood))
			}
			rep, _ := d.Status(context.Background(), peer(i+1).String())
			return fmt.Sprintf("%d pending, e.g. %s: info %+v keys %v listener %b status %+v", len(pending), peer(i+1), in, ids, lisIDs()[peer(i+1)], rep.Peers)
		}
		return ""
	}
	waitFor(fmt.Sprintf("%d peers rolled to k2", n), time.Minute, func() bool {
		l := lisIDs()
		for i := range pending {
			if ids := l[peer(i+1)]; ids&(1<<1) == 0 && ids&(1<<2) != 0 && carries(i, 2, 2, 3) {
				delete(pending, i)
				last = time.Since(at)
			}
		}
		return len(pending) == 0
	})
	c2 := cpuNow(b) - (kaCPU.Load() - ka1) - (pollCPU - p1)
	b.StopTimer()
	r1, w1, bw1 := calls()
	fp1, lfp1 := fingerprints()
	_, full1 := d.Passes()
	// The idle window's CPU, scaled to the roll's span.
	idleMs := float64(idle) / 1e6 * float64(last) / float64(idleWindow)
	return fleetRollResult{cpu: float64(c2-c1) / 1e6, idle: idleMs, lastDone: float64(last.Milliseconds()), queries: float64(sp.Queries() - q0),
		reads: float64(r1 - r0), writes: float64(w1 - w0), borrows: float64(bw1 - bw0),
		fps: float64(fp1 - fp0), lisFps: float64(lfp1 - lfp0), passes: float64(full1 - full0)}
}
