package metrics

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// reference builds, with client_golang's own vectors on a pedantic
// registry, the per-peer series that the store is fed below: what a
// registry's Gather (label checks, consistency, sort) makes of them.
type reference struct {
	reg  *prometheus.Registry
	vecs map[string]*prometheus.GaugeVec // counters too: the type is set after
	cnts map[string]*prometheus.CounterVec
}

func newReference(t *testing.T, s *peerStore) *reference {
	r := &reference{reg: prometheus.NewPedanticRegistry(), vecs: map[string]*prometheus.GaugeVec{}, cnts: map[string]*prometheus.CounterVec{}}
	for _, f := range s.families() {
		var c prometheus.Collector
		if f.typ == dto.MetricType_COUNTER {
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.name, Help: f.help}, f.labels)
			r.cnts[f.name], c = v, v
		} else {
			v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.name, Help: f.help}, f.labels)
			r.vecs[f.name], c = v, v
		}
		if err := r.reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *reference) set(name string, v float64, lv ...string) {
	if g := r.vecs[name]; g != nil {
		g.WithLabelValues(lv...).Set(v)
		return
	}
	c := r.cnts[name].WithLabelValues(lv...)
	c.Add(v)
}

func text(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestGathererMatchesRegistry: the per-peer series Gatherer serves are,
// to the byte, what client_golang's registry makes of the same series
// (names, help, types, label order, series order), after series came and
// went (peers, keys, sockets, states deleted and replaced), and lint
// clean; the process-wide metrics are served beside them once each.
func TestGathererMatchesRegistry(t *testing.T) {
	m, _ := newTest(t)
	now := time.Unix(1700000000, 0)
	m.SetClock(func() time.Time { return now })
	ref := newReference(t, m.peers)
	peers := []Peer{{Addr: "192.0.2.10"}, {Addr: "192.0.2.9", VRF: "blue"}, {Addr: "192.0.2.9"}, {Addr: "2001:db8::1", VRF: "red"}}
	for i, p := range peers {
		cur, rn := uint8(i+1), uint8(100+i)
		m.SetPeerKeys(p, &cur, &rn, 2)
		ref.set(NamePeerCurrentKeyID, float64(cur), p.Addr, p.VRF)
		ref.set(NamePeerRNextKeyID, float64(rn), p.Addr, p.VRF)
		ref.set(NamePeerKeys, 2, p.Addr, p.VRF)
		for _, st := range []string{"steady", "announced", "grace"}[:1+i%3] {
			m.SetRotationState(p, st)
		}
		st := []string{"steady", "announced", "grace"}[i%3]
		ref.set(NameRotationState, 1, p.Addr, p.VRF, st)
		m.SetVerifyFailing(p, i%2 == 0)
		ref.set(NamePeerVerifyFailing, float64(1-i%2), p.Addr, p.VRF)
		// Read 2.5s ago; one peer's read time is after the clock's (0).
		m.SetCountersReadAt(p, now.Add(-2500*time.Millisecond+time.Duration(i/3)*time.Hour))
		ref.set(NamePeerCountersAge, []float64{2.5, 0}[i/3], p.Addr, p.VRF)
		m.RotationStarted(p)
		m.RotationStarted(p)
		ref.set(NameRotationsStarted, 2, p.Addr, p.VRF)
		m.RotationCompleted(p)
		ref.set(NameRotationsCompleted, 1, p.Addr, p.VRF)
		m.RotationAborted(p, "switch-timeout")
		ref.set(NameRotationsAborted, 1, p.Addr, p.VRF, "switch-timeout")
		if i == 1 {
			m.RotationAborted(p, "guard-refused")
			ref.set(NameRotationsAborted, 1, p.Addr, p.VRF, "guard-refused")
		}
		// An old key set, then the present one (one key stays, one goes,
		// one comes).
		m.ObserveKeys(p, []KeyCounters{{Key: "20/21", SendID: 20, RecvID: 21, PktGood: 1}, {Key: "9/9", SendID: 9, RecvID: 9}})
		// A key without a name is named SendID/RecvID.
		keys := []KeyCounters{{Key: "20/21", SendID: 20, RecvID: 21, PktGood: uint64(10 * i), PktBad: 1}, {Key: "3/4", SendID: 3, RecvID: 4, PktGood: 7}, {SendID: 5, RecvID: 6, PktBad: 2}}
		m.ObserveKeys(p, keys)
		for _, k := range keys {
			if k.Key == "" {
				k.Key = fmt.Sprintf("%d/%d", k.SendID, k.RecvID)
			}
			lv := []string{p.Addr, p.VRF, k.Key, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID))}
			ref.set(NameKeyPktGood, float64(k.PktGood), lv...)
			ref.set(NameKeyPktBad, float64(k.PktBad), lv...)
		}
		for j, sock := range []string{"established", "listen 0.0.0.0:179"} {
			c := SocketCounters{PktGood: uint64(i + j), PktBad: 2, PktKeyNotFound: 3, PktAORequired: uint64(j)}
			m.ObserveSocket(p, sock, c)
			if j == 1 && i == 0 {
				m.DeleteSocket(p, sock)
				continue
			}
			ref.set(NameSocketPktGood, float64(c.PktGood), p.Addr, p.VRF, sock)
			ref.set(NameSocketPktBad, float64(c.PktBad), p.Addr, p.VRF, sock)
			ref.set(NameSocketPktKeyNotFound, float64(c.PktKeyNotFound), p.Addr, p.VRF, sock)
			ref.set(NameSocketPktAORequired, float64(c.PktAORequired), p.Addr, p.VRF, sock)
		}
	}
	gone := Peer{Addr: "198.51.100.1"}
	m.SetPeerKeys(gone, nil, nil, 0)
	m.ObserveKeys(gone, []KeyCounters{{Key: "1/1", SendID: 1, RecvID: 1}})
	m.SetRotationState(gone, "steady")
	m.DeletePeer(gone)
	m.SetOptmem(20480, 30000)

	for scrape := range 2 { // the second from the sorted series kept
		got, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var peerOnly []*dto.MetricFamily
		names := map[string]int{}
		for _, mf := range got {
			names[mf.GetName()]++
			if _, ok := ref.vecs[mf.GetName()]; ok {
				peerOnly = append(peerOnly, mf)
			} else if _, ok := ref.cnts[mf.GetName()]; ok {
				peerOnly = append(peerOnly, mf)
			}
		}
		if g, w := text(t, peerOnly), text(t, want); g != w {
			t.Fatalf("scrape %d: per-peer series differ from the registry's\n--- got:\n%s--- want:\n%s", scrape, g, w)
		}
		for name, n := range names {
			if n != 1 {
				t.Errorf("family %s served %d times", name, n)
			}
		}
		if names[NameOptmemLimit] != 1 {
			t.Errorf("the registry's %s not served beside the per-peer series", NameOptmemLimit)
		}
	}
	// Each family's text length, kept as series come and go, is what a
	// text scrape writes (the scrape sizes its buffer by it).
	for _, f := range m.peers.families() {
		want := 0
		if len(f.rows) > 0 {
			want = len(f.head) + f.textLen
			for _, r := range f.rows {
				want += len(appendFloat(nil, f.value(r.idx, unixSeconds(now)))) + 1
			}
		}
		if got := len(f.appendText(nil, unixSeconds(now))); got != want {
			t.Errorf("%s: text scrape wrote %d bytes, its kept length says %d", f.name, got, want)
		}
	}
	problems, err := testutil.GatherAndLint(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// TestPeerNamesClaimed: a metric registered under a per-peer series' name
// is refused, as it would be served twice.
func TestPeerNamesClaimed(t *testing.T) {
	m, reg := newTest(t)
	_ = m
	err := reg.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: NamePeerCurrentKeyID, Help: "x"}))
	if err == nil {
		t.Fatalf("registering %s beside the per-peer series succeeded", NamePeerCurrentKeyID)
	}
}

// BenchmarkScrape is one scrape of 4,096 peers with 4 keys and one socket
// each, every series present, as a text scrape through Handler and as a
// Gather for a protobuf scrape (its encoding not included): the metrics'
// part of a scrape (the daemon's BenchmarkScrape adds its refresh hook).
// The values change between scrapes, the key sets do not, as in steady
// state.
func BenchmarkScrape(b *testing.B) {
	for _, how := range []string{"text", "gather", "text/per_key", "gather/per_key"} {
		b.Run(how, func(b *testing.B) {
			n := 4096
			m, err := New(prometheus.NewRegistry(), Options{PerKey: strings.HasSuffix(how, "/per_key")})
			if err != nil {
				b.Fatal(err)
			}
			ps := make([]Peer, n)
			keys := make([]KeyCounters, 4)
			update := func(v uint64) {
				for i, p := range ps {
					cur, rn := uint8(1), uint8(2)
					m.SetPeerKeys(p, &cur, &rn, 4)
					m.SetRotationState(p, "steady")
					m.SetVerifyFailing(p, false)
					for k := range keys {
						keys[k] = KeyCounters{Key: strconv.Itoa(k) + "/" + strconv.Itoa(k+100), SendID: uint8(k), RecvID: uint8(k + 100), PktGood: v + uint64(i)}
					}
					m.ObserveKeys(p, keys)
					m.ObserveSocket(p, "established", SocketCounters{PktGood: v})
					m.SetCountersReadAt(p, time.Now())
				}
			}
			for i := range ps {
				ps[i] = Peer{Addr: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
			}
			update(0)
			g, h := m.Gatherer(), m.Handler()
			text := func() {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				h.ServeHTTP(discard{}, req)
			}
			text()
			series := 0
			mfs, err := g.Gather()
			if err != nil {
				b.Fatal(err)
			}
			for _, mf := range mfs {
				series += len(mf.GetMetric())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				update(uint64(i))
				b.StartTimer()
				if strings.HasPrefix(how, "text") {
					text()
				} else if _, err := g.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(series), "series")
		})
	}
}

// TestHandlerText: a text scrape through Handler is what expfmt writes of
// Gatherer's families (the registry's first, then the per-peer ones), the
// hook run once; a protobuf scrape is served too, with the same series.
func TestHandlerText(t *testing.T) {
	m, _ := newTest(t)
	now := time.Unix(1700000000, 0)
	m.SetClock(func() time.Time { return now })
	calls := 0
	m.OnCollect(func() {
		calls++
		p := Peer{Addr: "192.0.2.1", VRF: "a\"b\\c\nd"} // every escaped character
		m.SetPeerKeys(p, nil, nil, calls)
		m.SetRotationState(p, "steady")
		m.ObserveKeys(p, []KeyCounters{{Key: "1/2", SendID: 1, RecvID: 2, PktGood: 1 << 60, PktBad: 3}})
		m.ObserveSocket(p, "established", SocketCounters{PktGood: 123456789})
		m.SetCountersReadAt(p, now.Add(-1500*time.Millisecond))
		m.SetOptmem(20480, 30000)
	})
	h := m.Handler()
	get := func(accept string) (string, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("Accept %q: status %d: %s", accept, rec.Code, rec.Body)
		}
		return rec.Body.String(), rec.Header().Get("Content-Type")
	}
	body, ctype := get("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	if calls != 1 {
		t.Errorf("hook ran %d times in one scrape", calls)
	}
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ctype)
	}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var regFirst, peer []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "aokeyd_peer_") || strings.HasPrefix(mf.GetName(), "aokeyd_key_pkt") ||
			strings.HasPrefix(mf.GetName(), "aokeyd_socket_") || mf.GetName() == NameRotationState {
			peer = append(peer, mf)
		} else {
			regFirst = append(regFirst, mf)
		}
	}
	// The gather above ran the hook once more: the installed gauge is 2.
	want := strings.Replace(text(t, append(regFirst, peer...)), `aokeyd_peer_keys_installed{peer="192.0.2.1",vrf="a\"b\\c\nd"} 2`,
		`aokeyd_peer_keys_installed{peer="192.0.2.1",vrf="a\"b\\c\nd"} 1`, 1)
	if body != want {
		t.Errorf("text scrape differs from expfmt's text of the gathered families\n--- got:\n%s--- want:\n%s", body, want)
	}
	if _, ctype := get("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"); !strings.Contains(ctype, "protobuf") {
		t.Errorf("protobuf scrape served as %q", ctype)
	}
	if body, _ := get(""); !strings.Contains(body, NameKeyPktGood+`{key="1/2"`) {
		t.Errorf("a scrape without Accept lacks the per-key series:\n%s", body)
	}
}

// discard is an http.ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) WriteHeader(int)             {}
func (discard) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkFirstScrape is a text scrape of 4,096 peers with 4 keys and one
// socket each whose series are all new (aokeyd's first scrape, or the one
// after a fleet-wide roll for the key series): the setters that create
// them and the scrape that sorts them.
func BenchmarkFirstScrape(b *testing.B) {
	ps := make([]Peer, 4096)
	for i := range ps {
		ps[i] = Peer{Addr: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
	}
	keys := make([]KeyCounters, 4)
	for k := range keys {
		keys[k] = KeyCounters{SendID: uint8(k), RecvID: uint8(k + 100), PktGood: 7}
	}
	b.ReportAllocs()
	for range b.N {
		m, err := New(prometheus.NewRegistry(), Options{PerKey: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range ps {
			cur, rn := uint8(1), uint8(2)
			m.SetPeerKeys(p, &cur, &rn, 4)
			m.SetRotationState(p, "steady")
			m.SetVerifyFailing(p, false)
			m.ObserveKeys(p, keys)
			m.ObserveSocket(p, "established", SocketCounters{PktGood: 9})
			m.SetCountersReadAt(p, time.Now())
		}
		m.Handler().ServeHTTP(discard{}, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	}
}

// TestObserveSession: one ObserveSession is what ObserveSocket
// ("established"), ObserveKeys and SetCountersReadAt make of the same
// counters, the second time too (key set kept, values changed).
func TestObserveSession(t *testing.T) {
	now := time.Unix(1700000000, 0)
	p := Peer{Addr: "192.0.2.1", VRF: "blue"}
	scrape := func(m *Metrics) string {
		t.Helper()
		mfs, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		return text(t, mfs)
	}
	one, _ := newTest(t)
	three, _ := newTest(t)
	for _, m := range []*Metrics{one, three} {
		m.SetClock(func() time.Time { return now })
	}
	for i := range uint64(2) {
		sock := SocketCounters{PktGood: 10 + i, PktBad: 1, PktKeyNotFound: 2, PktAORequired: 3}
		keys := []KeyCounters{{SendID: 1, RecvID: 2, PktGood: 5 + i}, {SendID: 3, RecvID: 4, PktBad: i}}
		at := now.Add(-time.Duration(i+1) * time.Second)
		one.ObserveSession(p, sock, keys, at)
		three.ObserveSocket(p, "established", sock)
		three.ObserveKeys(p, keys)
		three.SetCountersReadAt(p, at)
		if a, b := scrape(one), scrape(three); a != b {
			t.Fatalf("round %d: ObserveSession gives\n%s\nthe three calls\n%s", i, a, b)
		}
	}
}

// TestAppendFloat: values are written as expfmt writes them
// (strconv 'g', shortest), the integer fast path included, around its
// bounds too.
func TestAppendFloat(t *testing.T) {
	vals := []float64{0, 1, -1, 2, 7, 42, 999999, 1e6, 1e6 + 1, -999999, -1e6, 123456789, 1 << 60, 0.5, 1.5, 2.5e-7,
		999999.5, math.Inf(1), math.Inf(-1), math.NaN(), 1e21, 1e300, math.MaxUint32}
	for i := range 3000 {
		vals = append(vals, float64(i*i*37), float64(i)/7)
	}
	for _, v := range vals {
		var want bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&want, &dto.MetricFamily{Name: strPtr("x"), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: &v}}}}); err != nil {
			t.Fatal(err)
		}
		w := strings.TrimSuffix(strings.SplitN(want.String(), "\nx ", 2)[1], "\n")
		if got := string(appendFloat(nil, v)); got != w {
			t.Errorf("appendFloat(%v) = %q, expfmt writes %q", v, got, w)
		}
	}
}

func strPtr(s string) *string { return &s }
