package metrics

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Peer names one BGP neighbor in labels.
type Peer struct {
	Addr string // neighbor address or prefix
	VRF  string // "" for the default VRF
}

// KeyCounters are one key's TCP_AO_GET_KEYS counters.
type KeyCounters struct {
	Key     string // the key label; "" for "SendID/RecvID"
	SendID  uint8
	RecvID  uint8
	PktGood uint64
	PktBad  uint64
}

// SocketCounters are one socket's TCP_AO_INFO counters.
type SocketCounters struct {
	PktGood        uint64
	PktBad         uint64
	PktKeyNotFound uint64
	PktAORequired  uint64
}

// Metrics is aokeyd's metric set. Its methods are safe for concurrent use.
// The per-peer series are served by Gatherer, not by the registry given to
// New.
type Metrics struct {
	lastSync                  prometheus.Gauge
	syncErrors                prometheus.Counter
	revokes                   *prometheus.CounterVec
	revokeDuration            prometheus.Histogram
	optmemLimit, optmemNeeded prometheus.Gauge
	refused                   prometheus.Counter
	speakerRPCs               *prometheus.CounterVec
	heldBack                  *prometheus.GaugeVec
	kept                      *prometheus.GaugeVec
	sessionCache              *sessionCacheCollector
	peers                     *peerStore
	reg                       prometheus.Gatherer

	scrapeMu sync.Mutex // one scrape at a time runs the hook and gathers
	hook     func()
	now      func() time.Time
	textBuf  atomic.Pointer[[]byte] // the text scrapes' buffer, kept between them
}

// OnCollect sets the function each scrape runs before it gathers (aokeyd:
// publish the counters its rotation machines last read, reading
// TCP_AO_INFO and TCP_AO_GET_KEYS only where they are stale, and the
// rotators' states). It runs on the scraping goroutine, one scrape at a
// time.
func (m *Metrics) OnCollect(f func()) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	m.hook = f
}

// Gatherer is what aokeyd serves (promhttp.HandlerFor): each Gather runs
// the OnCollect hook, then returns the registry's metrics and the per-peer
// series.
func (m *Metrics) Gatherer() prometheus.Gatherer { return gatherer{m: m, reg: m.reg} }

// Options are the metrics' settings (aokeyd.yaml's metrics section).
type Options struct {
	// PerKey exports every per-peer family: the per-key counters (two
	// series per key) and the per-peer detail no shipped alert reads
	// (PerKeyFamilies). Off, a peer has at most MaxDefaultPerPeer series
	// in steady state.
	PerKey bool
}

// MaxDefaultPerPeer is the most series carrying one peer's labels without
// Options.PerKey, in steady state: one in each per-peer family not in
// PerKeyFamilies. aokeyd_keys_kept adds one per key the never-strand rule
// holds on the peer's sockets, which its alerts report at once.
const MaxDefaultPerPeer = 8

// New creates the metrics and registers the process-wide ones on reg; the
// per-peer series are kept apart and served, with reg's metrics, by
// Gatherer.
func New(reg *prometheus.Registry, o Options) (*Metrics, error) {
	m := &Metrics{
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameKeySourceLastSync,
			Help: "Unix time of the last successful key source read."}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: NameKeySourceSyncErrors,
			Help: "Failed key source reads."}),
		revokes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameRevokes,
			Help: "Revoked-key removals, by per-socket outcome."}, []string{LabelAction}),
		revokeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: NameRevokeDuration,
			Help:    "Wall time of revoke requests.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10}}),
		optmemLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameOptmemLimit,
			Help: "net.core.optmem_max."}),
		optmemNeeded: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameOptmemNeeded,
			Help: "Socket option memory the largest TCP-AO key set needs."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: NameControlRefused,
			Help: "Control socket connections refused (peer uid not permitted)."}),
		speakerRPCs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameSpeakerRPCs,
			Help: "Calls made to the BGP speaker's API, by method."}, []string{LabelMethod}),
		heldBack: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameKeysHeldBack,
			Help: "1 for each chain or key of the key source held back: its last good version is kept (last_good=true), or nothing of it is deleted (last_good=false)."},
			[]string{LabelChain, LabelKey, LabelReason, LabelLastGood}),
		kept: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameKeysKept,
			Help: "1 for each key the never-strand rule keeps on a socket against the desired state: reason carried (no longer desired, but it carries the session or the peer last authenticated with it), edited-in-place (new material under its IDs held back), foreign (installed by another agent: never changed) or foreign-clash (a desired key not installed because a foreign key has its IDs: the roll waits)."},
			[]string{LabelPeer, LabelVRF, LabelSocket, LabelSendID, LabelRecvID, LabelReason}),
		sessionCache: &sessionCacheCollector{desc: prometheus.NewDesc(NameSpeakerSessionCache,
			"The session guard's questions about a peer's session, by result: hit (answered from the session state followed on the speaker's event stream) or miss (asked the speaker about the neighbor).",
			[]string{LabelResult}, nil)},
		peers: newPeerStore(o.PerKey),
		reg:   reg,
		now:   time.Now,
	}
	for _, c := range []prometheus.Collector{m.lastSync, m.syncErrors, m.revokes, m.revokeDuration,
		m.optmemLimit, m.optmemNeeded, m.refused, m.speakerRPCs, m.heldBack, m.kept, m.sessionCache, peerNames{m.peers}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// SessionCacheFrom sets where the session guard's cache counts come from
// (bgp.Tracker.CacheStats); each scrape reads them.
func (m *Metrics) SessionCacheFrom(stats func() (hits, misses uint64)) {
	m.sessionCache.mu.Lock()
	defer m.sessionCache.mu.Unlock()
	m.sessionCache.stats = stats
}

// sessionCacheCollector reports the session guard's cache counts as read
// at scrape time (nothing until SessionCacheFrom).
type sessionCacheCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	stats func() (hits, misses uint64)
}

func (c *sessionCacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionCacheCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	stats := c.stats
	c.mu.Unlock()
	if stats == nil {
		return
	}
	hits, misses := stats()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(hits), "hit")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(misses), "miss")
}

// SpeakerRPC counts one call to the BGP speaker's API method.
func (m *Metrics) SpeakerRPC(method string) { m.speakerRPCs.WithLabelValues(method).Inc() }

// SetPeerKeys records the peer's Current_key SendID and RNext_key RecvID
// (nil: none) and how many keys its established socket holds.
func (m *Metrics) SetPeerKeys(p Peer, current, rnext *uint8, installed int) {
	id := func(v *uint8) float64 {
		if v == nil {
			return -1
		}
		return float64(*v)
	}
	m.peers.setPeerKeys(p, id(current), id(rnext), float64(installed))
}

// SetRotationState sets the peer's state series to 1 and drops its others.
func (m *Metrics) SetRotationState(p Peer, state string) { m.peers.setState(p, state) }

// RotationStarted counts a rotation that began on the peer.
func (m *Metrics) RotationStarted(p Peer) {
	m.peers.inc(p, m.peers.started, func(r *detailRows) **row { return &r.started })
}

// RotationCompleted counts a rotation that retired the old key.
func (m *Metrics) RotationCompleted(p Peer) {
	m.peers.inc(p, m.peers.completed, func(r *detailRows) **row { return &r.completed })
}

// RotationAborted counts an aborted rotation. reason is the word of the
// roll's rotator.AbortReason ("switch-timeout", "guard-refused",
// "session-down", "kernel-error"), never derived from an error's text.
func (m *Metrics) RotationAborted(p Peer, reason string) {
	m.peers.incAborted(p, reason)
}

// KeySourceSynced records a successful key source read at t.
func (m *Metrics) KeySourceSynced(t time.Time) {
	m.lastSync.Set(float64(t.UnixNano()) / 1e9)
}

// KeySourceFailed counts a failed key source read.
func (m *Metrics) KeySourceFailed() { m.syncErrors.Inc() }

// Revoked counts one socket's revoke outcome (deleted, forced-replaced,
// reset, kept, error).
func (m *Metrics) Revoked(action string) { m.revokes.WithLabelValues(action).Inc() }

// SetKeyNotFound records whether the listeners count segments whose KeyID
// matches no key while the peer's session is down and no other is (the
// peer's IDs are not mirrored).
func (m *Metrics) SetKeyNotFound(p Peer, v bool) {
	f := 0.0
	if v {
		f = 1
	}
	m.peers.setKeyNotFound(p, f)
}

// SetVerifyFailing records whether the peer's segments fail TCP-AO
// verification on the listener while its session is down.
func (m *Metrics) SetVerifyFailing(p Peer, failing bool) {
	v := 0.0
	if failing {
		v = 1
	}
	m.peers.setVerify(p, v)
}

// RevokeDone records the wall time of a revoke request.
func (m *Metrics) RevokeDone(d time.Duration) { m.revokeDuration.Observe(d.Seconds()) }

// SetOptmem records net.core.optmem_max and what the keys need.
func (m *Metrics) SetOptmem(limit, needed int) {
	m.optmemLimit.Set(float64(limit))
	m.optmemNeeded.Set(float64(needed))
}

// HeldBack is one chain or key of the key source held back.
type HeldBack struct {
	Chain, Key, Reason string
	LastGood           bool
}

// SetHeldBack replaces the held-back series with held.
func (m *Metrics) SetHeldBack(held []HeldBack) {
	m.heldBack.Reset()
	for _, h := range held {
		m.heldBack.WithLabelValues(h.Chain, h.Key, h.Reason, strconv.FormatBool(h.LastGood)).Set(1)
	}
}

// Kept is one key the never-strand rule keeps on a socket (NameKeysKept).
type Kept struct {
	Peer, VRF, Socket string
	SendID, RecvID    uint8
	Reason            string
}

// SetKept replaces the kept-key series with kept.
func (m *Metrics) SetKept(kept []Kept) {
	m.kept.Reset()
	for _, k := range kept {
		m.kept.WithLabelValues(k.Peer, k.VRF, k.Socket, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID)), k.Reason).Set(1)
	}
}

// ControlRefused counts a refused control connection.
func (m *Metrics) ControlRefused() { m.refused.Inc() }

// ObserveKeys replaces the peer's per-key counters with keys (keys that
// are gone lose their series).
func (m *Metrics) ObserveKeys(p Peer, keys []KeyCounters) { m.peers.setKeys(p, keys) }

// SetCountersReadAt records when the peer's kernel counters (ObserveKeys,
// ObserveSocket) were read; each scrape serves their age at that time (by
// the clock SetClock gave), so a peer whose counters did not change needs
// no call per scrape.
func (m *Metrics) SetCountersReadAt(p Peer, at time.Time) {
	m.peers.setReadAt(p, unixSeconds(at))
}

// SetClock sets the clock scrapes take the counters' age by (default
// time.Now).
func (m *Metrics) SetClock(now func() time.Time) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	m.now = now
}

// ObserveSocket records one socket's counters for the peer. socket names it
// as status does ("peer 192.0.2.1", "listen 0.0.0.0:179").
func (m *Metrics) ObserveSocket(p Peer, socket string, c SocketCounters) {
	m.peers.setSocket(p, socket, c)
}

// ObserveSession records one established session's counters in one call:
// its socket's (as ObserveSocket with socket "established"), its keys' (as
// ObserveKeys) and when they were read (as SetCountersReadAt).
func (m *Metrics) ObserveSession(p Peer, sock SocketCounters, keys []KeyCounters, readAt time.Time) {
	m.peers.observeSession(p, sock, keys, unixSeconds(readAt))
}

// DeleteSocket drops one socket's counters (the socket closed).
func (m *Metrics) DeleteSocket(p Peer, socket string) { m.peers.deleteSocket(p, socket) }

// DeletePeer drops every series of the peer.
func (m *Metrics) DeletePeer(p Peer) { m.peers.deletePeer(p) }

// PerKeyFamilies are the per-peer families exported only with
// Options.PerKey, by name.
func PerKeyFamilies() []string {
	var out []string
	for _, f := range newPeerStore(false).families() {
		if f.detail {
			out = append(out, f.name)
		}
	}
	return out
}
