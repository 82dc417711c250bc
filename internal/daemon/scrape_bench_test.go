package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// metricsFleet is a daemon with n established, steady sessions on the
// in-memory kernel and its metrics, as aokeyd serves them.
type metricsFleet struct {
	// base is the Go heap in use and the RSS before the daemon started
	// (settledMem), with the speaker, its listener and the key source.
	baseHeap, baseRSS int64
	baseLive          int64 // HeapAlloc then (liveHeap)
	d                 *daemon.Daemon
	mt                *metrics.Metrics
	h                 http.Handler // what aokeyd serves
	socks             []*countingSocket
	stop              func() // stops the daemon (Cleanup does too)
}

// newMetricsFleet starts the daemon over n steady sessions; refresh and
// steady are the key source reads and the sessions' re-reads (0: the
// defaults). Its metrics are aokeyd's default set, every series with
// $AOKEYD_METRICS_PER_KEY=1 (metrics.per_key); with $AOKEYD_SCRAPE_PER_PEER=1
// the policy binds each peer on its own, as make bench's fleet does.
func newMetricsFleet(b *testing.B, n int, refresh, steady time.Duration) *metricsFleet {
	b.Helper()
	now := time.Now()
	// Four keys a peer, as make bench's daemon item has them: k1 sends,
	// the others are installed for their send lifetimes to come.
	var ks []testKey
	for j := range 4 {
		ks = append(ks, testKey{name: fmt.Sprintf("k%d", j+1), send: uint8(20 + 2*j), recv: uint8(21 + 2*j),
			secret: fmt.Sprintf("scrape-bench-secret-k%d-Hy6", j+1), sendStart: now.Add(time.Duration(j*30*24-1) * time.Hour)})
	}
	var infos []bgp.PeerInfo
	for i := range n {
		infos = append(infos, passivePeer(i))
	}
	pol := "version: 1\nsafety:\n  switch_timeout: 5m\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 10.1.0.0/16\n    key_chain: core\n"
	// With $AOKEYD_SCRAPE_PER_PEER=1, one binding a peer, as make bench's
	// fleet has them: the listener holds every peer's keys (16,384 at
	// 4,096 peers), not one prefix's four.
	listenerKeys := len(ks)
	if os.Getenv("AOKEYD_SCRAPE_PER_PEER") == "1" {
		var pb strings.Builder
		pb.WriteString("version: 1\nsafety:\n  switch_timeout: 5m\nkey_chains:\n  - name: core\npeers:\n")
		for i := range n {
			fmt.Fprintf(&pb, "  - neighbor: %s\n    key_chain: core\n", fleetPeer(i))
		}
		pol, listenerKeys = pb.String(), n*len(ks)
	}
	src := &fakeSource{}
	b.Cleanup(src.close)
	var mkts []keystore.MKT
	for _, k := range ks {
		mkts = append(mkts, k.mkt())
	}
	src.setKeys(mkts...)
	for _, m := range mkts {
		m.Zero()
	}
	sp := bgptest.NewSpeaker("scrape-speaker", speakerPID, n, infos...)
	var netOpts []tcpaotest.Option
	if listenerKeys > len(ks) {
		// optmem_max as aokeyd's kernel.raise_optmem leaves it for a
		// listener with a fleet's keys.
		netOpts = append(netOpts, tcpaotest.WithOptMemMax(1<<30))
	}
	net, disc := tcpaotest.NewNet(netOpts...), newFakeDiscoverer()
	lis, _ := listenOn(b, net, disc)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	b.Cleanup(cache.Close)
	// As aokeyd and make bench register them, with aokeyd's default set
	// unless $AOKEYD_METRICS_PER_KEY is 1 (metrics.per_key).
	perKey := os.Getenv("AOKEYD_METRICS_PER_KEY") == "1"
	mt, err := metrics.New(prometheus.NewRegistry(), metrics.Options{PerKey: perKey})
	if err != nil {
		b.Fatal(err)
	}
	baseHeap, baseRSS := settledMem(b)
	baseLive := liveHeap()
	d, err := daemon.New(daemon.Options{
		Policy: parsePolicy(b, pol), Keys: cache, Source: src, Speaker: sp, Discoverer: disc, ListenPort: bgpPort,
		Rotator: rotator.Config{Grace: 20 * time.Millisecond, Poll: 10 * time.Millisecond, Steady: steady},
		Resync:  time.Hour, Refresh: refresh, OptMemMax: func() (int, error) { return 1 << 30, nil },
		Logger: slog.New(slog.DiscardHandler), Metrics: mt, SocketOf: disc.socketOf,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	f := &metricsFleet{baseHeap: baseHeap, baseRSS: baseRSS, baseLive: baseLive, d: d, mt: mt, h: mt.Handler(), socks: make([]*countingSocket, n)}
	f.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}
	b.Cleanup(f.stop)
	waitFor := func(what string, cond func() bool) {
		b.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				rep, err := d.Status(context.Background(), "")
				if err == nil && len(rep.Peers) > 0 {
					b.Logf("a peer: %+v", rep.Peers[0].Rotation)
				}
				b.Fatalf("not within 1m: %s", what)
			}
		}
	}
	waitFor("the listener's keys", func() bool { c, _ := lis.Keys(tcpao.KeyFilter{}); return len(c) == listenerKeys })
	for i := range n {
		client, err := net.Socket(fleetPeer(i))
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range ks {
			mk := k.mirror()
			first := k.name == "k1" // the client sends with k1, and asks for it
			if err := client.AddKey(mk, tcpao.AddOptions{SetCurrent: first, SetRNext: first}); err != nil {
				b.Fatal(err)
			}
			mk.Secret.Zero()
		}
		acc, err := net.Connect(client, lis)
		if err != nil {
			b.Fatalf("connect %s: %v", fleetPeer(i), err)
		}
		f.socks[i] = disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), client.LocalAddr(), false)
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
	if listenerKeys > len(ks) {
		// aokeyd syncs its listeners at least every 30 s
		// (config.DefaultResync; an hour here): its steady state is the
		// one after a listener sync that saw every session up, which
		// make bench's daemon item is measured in.
		_, full := d.Passes()
		d.SessionEvent()
		waitFor("a listener sync", func() bool { _, f := d.Passes(); return f > full })
	}
	return f
}

// scrape is one text scrape as Prometheus gets it, into w.
func (f *metricsFleet) scrape(b *testing.B, w http.ResponseWriter) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1") // Prometheus' fallback format
	f.h.ServeHTTP(w, req)
}

// BenchmarkScrape is the CPU time of one metrics scrape (a text scrape
// through the daemon's metrics handler, as Prometheus gets it) with N
// established, steady sessions on the in-memory kernel (N:
// $AOKEYD_SCRAPE_PEERS, default 4096), as cpu-ns/scrape and
// socket-reads/scrape. The in-memory kernel's reads cost far less than the
// real one's (no syscalls, no HMAC fingerprints): make bench measures the
// guest's figure; this one shows how much of a scrape is reads.
//
// It also reports what make bench's daemon item reports of the metrics,
// on this machine: the series of a scrape, the most of them one peer has
// (series carrying its peer label), and the daemon's share of the Go heap
// in use and of the RSS once every series exists (after the text scrapes
// and a protobuf gather: *-share-MiB), against the process before the
// daemon started, each after a GC that returns freed memory. Unlike the
// guest's share, this one holds the sessions' sockets and keys (the
// in-memory kernel's, 8,192 sockets at 4,096 peers); *-scraped-MiB is
// what the scrapes added to the steady daemon (every series created).
// live-share-MiB is the heap share's live objects alone (HeapAlloc).
func BenchmarkScrape(b *testing.B) {
	n := envPeers(b, "AOKEYD_SCRAPE_PEERS", 4096)
	f := newMetricsFleet(b, n, 0, 0)
	reads := func() (r int) {
		for _, s := range f.socks {
			n, _ := s.calls()
			r += n
		}
		return r
	}
	scrape := func() {
		w := &discardWriter{header: http.Header{}, code: http.StatusOK}
		f.scrape(b, w)
		if w.code != http.StatusOK {
			b.Fatalf("scrape: HTTP %d", w.code)
		}
	}
	heap0, rss0 := settledMem(b)
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

	rec := httptest.NewRecorder()
	f.scrape(b, rec)
	series, most := seriesPerPeer(b, rec.Body.Bytes())
	b.ReportMetric(float64(series), "series")
	b.ReportMetric(float64(most), "series/peer")
	if _, err := f.mt.Gatherer().Gather(); err != nil { // what a protobuf scrape keeps
		b.Fatal(err)
	}
	rec = nil
	heap, rss := settledMem(b)
	if path := os.Getenv("AOKEYD_SCRAPE_HEAP_PROFILE"); path != "" { // where the share is
		writeHeapProfile(b, path)
	}
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mib(heap-f.baseHeap), "heap-share-MiB")
	b.ReportMetric(mib(rss-f.baseRSS), "rss-share-MiB")
	b.ReportMetric(mib(heap-heap0), "heap-scraped-MiB")
	b.ReportMetric(mib(rss-rss0), "rss-scraped-MiB")

	// live-share-MiB counts live objects alone (HeapAlloc), without the
	// spans' free slots, which move from run to run with the order of
	// allocation: the steadier figure for a side by side.
	b.ReportMetric(mib(liveHeap()-f.baseLive), "live-share-MiB")
}

// liveHeap is the Go heap's live objects in bytes (HeapAlloc) after a GC.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// seriesPerPeer counts the series of a text scrape and the most that carry
// one peer's labels (peer and vrf).
func seriesPerPeer(b *testing.B, text []byte) (series, most int) {
	b.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		b.Fatal(err)
	}
	per := map[[2]string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			series++
			var peer, vrf string
			has := false
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case metrics.LabelPeer:
					peer, has = l.GetValue(), true
				case metrics.LabelVRF:
					vrf = l.GetValue()
				}
			}
			if has {
				per[[2]string{peer, vrf}]++
				most = max(most, per[[2]string{peer, vrf}])
			}
		}
	}
	return series, most
}

// settledMem is the Go heap in use and the RSS after a GC that returns
// freed memory to the OS.
func settledMem(b *testing.B) (heap, rss int64) {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Fatal(err)
	}
	var size, res int64
	if _, err := fmt.Sscan(string(st), &size, &res); err != nil {
		b.Fatal(err)
	}
	return int64(ms.HeapInuse), res * int64(os.Getpagesize())
}

// discardWriter is an http.ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// writeHeapProfile writes the live heap (after settledMem's GC) to path.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
