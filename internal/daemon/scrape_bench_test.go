package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// BenchmarkScrape is the CPU time of one metrics scrape (a text scrape
// through the daemon's metrics handler, as Prometheus gets it) with N established, steady sessions on the in-memory
// kernel (N: $AOKEYD_SCRAPE_PEERS, default 4096), as cpu-ns/scrape and
// socket-reads/scrape. The in-memory kernel's reads cost far less than the
// real one's (no syscalls, no HMAC fingerprints): make bench measures the
// guest's figure; this one shows how much of a scrape is reads.
func BenchmarkScrape(b *testing.B) {
	n := envPeers(b, "AOKEYD_SCRAPE_PEERS", 4096)
	now := time.Now()
	k1 := testKey{name: "k1", send: 20, recv: 21, secret: "scrape-bench-secret-k1-Hy6", sendStart: now.Add(-time.Hour)}
	var infos []bgp.PeerInfo
	for i := range n {
		infos = append(infos, passivePeer(i))
	}
	pol := "version: 1\nsafety:\n  switch_timeout: 5m\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 10.1.0.0/16\n    key_chain: core\n"
	src := &fakeSource{}
	b.Cleanup(src.close)
	m := k1.mkt()
	src.setKeys(m)
	m.Zero()
	sp := bgptest.NewSpeaker("scrape-speaker", speakerPID, n, infos...)
	net, disc := tcpaotest.NewNet(), newFakeDiscoverer()
	lis, _ := listenOn(b, net, disc)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	b.Cleanup(cache.Close)
	mt, err := metrics.New(prometheus.NewRegistry()) // as aokeyd and make bench register them
	if err != nil {
		b.Fatal(err)
	}
	h := mt.Handler() // what aokeyd serves
	d, err := daemon.New(daemon.Options{
		Policy: parsePolicy(b, pol), Keys: cache, Source: src, Speaker: sp, Discoverer: disc, ListenPort: bgpPort,
		Rotator: rotator.Config{Grace: 20 * time.Millisecond, Poll: 10 * time.Millisecond},
		Resync:  time.Hour, OptMemMax: func() (int, error) { return 1 << 30, nil },
		Logger: slog.New(slog.DiscardHandler), Metrics: mt, SocketOf: disc.socketOf,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	waitFor := func(what string, cond func() bool) {
		b.Helper()
		for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("not within 5m: %s", what)
			}
		}
	}
	waitFor("the listener's key", func() bool { c, _ := lis.Keys(tcpao.KeyFilter{}); return len(c) == 1 })
	socks := make([]*countingSocket, n)
	for i := range n {
		client, err := net.Socket(fleetPeer(i))
		if err != nil {
			b.Fatal(err)
		}
		mk := k1.mirror()
		if err := client.AddKey(mk, tcpao.AddOptions{}); err != nil {
			b.Fatal(err)
		}
		mk.Secret.Zero()
		acc, err := net.Connect(client, lis)
		if err != nil {
			b.Fatalf("connect %s: %v", fleetPeer(i), err)
		}
		socks[i] = disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), client.LocalAddr(), false)
		sp.Set(bgp.PeerInfo{Neighbor: fleetPeer(i), Local: localAddr, LocalPort: bgpPort, RemotePort: client.LocalAddr().Port(),
			State: bgp.StateEstablished, Uptime: now.Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
	}
	b.Logf("connected %d after %s", n, time.Since(now))
	waitFor(fmt.Sprintf("%d sessions steady", n), func() bool {
		rep, err := d.Status(context.Background(), "")
		if err != nil || len(rep.Peers) != n {
			return false
		}
		for _, p := range rep.Peers {
			if p.Rotation.State != string(rotator.StateSteady) {
				return false
			}
		}
		return true
	})
	b.Logf("steady after %s", time.Since(now))
	reads := func() (r int) {
		for _, s := range socks {
			n, _ := s.calls()
			r += n
		}
		return r
	}
	scrape := func() {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1") // Prometheus' fallback format
		w := &discardWriter{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("scrape: HTTP %d", w.code)
		}
	}
	scrape() // the first scrape creates the series
	r0, c0 := reads(), cpuNow(b)
	b.ResetTimer()
	for range b.N {
		scrape()
	}
	b.StopTimer()
	c1, r1 := cpuNow(b), reads()
	b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/scrape")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "socket-reads/scrape")
	b.ReportMetric(0, "ns/op")
}

// discardWriter is an http.ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
