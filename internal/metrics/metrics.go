package metrics

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Peer names one BGP neighbor in labels.
type Peer struct {
	Addr string // neighbor address or prefix
	VRF  string // "" for the default VRF
}

func (p Peer) labels() prometheus.Labels {
	return prometheus.Labels{LabelPeer: p.Addr, LabelVRF: p.VRF}
}

// KeyCounters are one key's TCP_AO_GET_KEYS counters.
type KeyCounters struct {
	Key     string // "chain/name"
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
type Metrics struct {
	current, rnext, keys, state *prometheus.GaugeVec
	verifyFailing               *prometheus.GaugeVec
	countersAge                 *prometheus.GaugeVec
	started, completed, aborted *prometheus.CounterVec
	lastSync                    prometheus.Gauge
	syncErrors                  prometheus.Counter
	revokes                     *prometheus.CounterVec
	revokeDuration              prometheus.Histogram
	optmemLimit, optmemNeeded   prometheus.Gauge
	refused                     prometheus.Counter
	speakerRPCs                 *prometheus.CounterVec
	heldBack                    *prometheus.GaugeVec
	kernel                      *kernelCollector
	perPeer                     *perPeerCollector

	statesMu sync.Mutex
	states   map[Peer]string // each peer's one rotation state series
}

// perPeerCollector gathers the per-peer series. On each scrape it first
// runs the refresh hook (OnCollect), which puts the kernel's counters (as
// last read) and the rotators' states into the series, then collects
// them.
type perPeerCollector struct {
	mu         sync.Mutex // one scrape at a time runs the hook and collects
	hook       func()
	collectors []prometheus.Collector
}

func (c *perPeerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c.collectors {
		x.Describe(ch)
	}
}

func (c *perPeerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hook != nil {
		c.hook()
	}
	for _, x := range c.collectors {
		x.Collect(ch)
	}
}

// OnCollect sets the function each scrape runs before the per-peer series
// are collected (aokeyd: publish the counters its rotation machines last
// read, reading TCP_AO_INFO and TCP_AO_GET_KEYS only where they are stale,
// and the rotators' states). It runs on the
// scraping goroutine, one scrape at a time.
func (m *Metrics) OnCollect(f func()) {
	m.perPeer.mu.Lock()
	defer m.perPeer.mu.Unlock()
	m.perPeer.hook = f
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	peer := []string{LabelPeer, LabelVRF}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append(append([]string(nil), peer...), labels...))
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string(nil), peer...), labels...))
	}
	m := &Metrics{
		current: gauge(NamePeerCurrentKeyID, "SendID of the peer's Current_key (-1: none)."),
		rnext:   gauge(NamePeerRNextKeyID, "RecvID of the peer's RNext_key (-1: none)."),
		keys:    gauge(NamePeerKeys, "TCP-AO keys installed on the peer's established socket."),
		state:   gauge(NameRotationState, "1 for the rotation state the peer is in.", LabelState),
		verifyFailing: gauge(NamePeerVerifyFailing,
			"1 while the peer's session is down and its segments fail TCP-AO verification on the listener (secret, key IDs or tcp_options differ)."),
		countersAge: gauge(NamePeerCountersAge,
			"Seconds since the peer's key and socket pkt counters were read from the kernel (served from the rotation machine's last poll; read on the scrape, age 0, when older than two steady periods)."),
		started:   counter(NameRotationsStarted, "Key rotations started."),
		completed: counter(NameRotationsCompleted, "Key rotations completed (old key retired)."),
		aborted:   counter(NameRotationsAborted, "Key rotations aborted, by reason.", LabelReason),
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
		kernel: newKernelCollector(),
		states: map[Peer]string{},
	}
	// heldBack is refreshed by the OnCollect hook too.
	m.perPeer = &perPeerCollector{collectors: []prometheus.Collector{m.current, m.rnext, m.keys, m.state, m.verifyFailing, m.countersAge,
		m.started, m.completed, m.aborted, m.kernel, m.heldBack}}
	for _, c := range []prometheus.Collector{m.perPeer, m.lastSync, m.syncErrors, m.revokes, m.revokeDuration,
		m.optmemLimit, m.optmemNeeded, m.refused, m.speakerRPCs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
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
	m.current.WithLabelValues(p.Addr, p.VRF).Set(id(current))
	m.rnext.WithLabelValues(p.Addr, p.VRF).Set(id(rnext))
	m.keys.WithLabelValues(p.Addr, p.VRF).Set(float64(installed))
}

// SetRotationState sets the peer's state series to 1 and drops its others.
func (m *Metrics) SetRotationState(p Peer, state string) {
	m.statesMu.Lock()
	defer m.statesMu.Unlock()
	old, seen := m.states[p]
	if seen && old == state {
		return
	}
	if seen {
		// The one series the peer had: a partial-match delete would
		// walk every peer's series, per peer, per scrape.
		m.state.DeleteLabelValues(p.Addr, p.VRF, old)
	}
	m.states[p] = state
	m.state.WithLabelValues(p.Addr, p.VRF, state).Set(1)
}

// RotationStarted counts a rotation that began on the peer.
func (m *Metrics) RotationStarted(p Peer) { m.started.With(p.labels()).Inc() }

// RotationCompleted counts a rotation that retired the old key.
func (m *Metrics) RotationCompleted(p Peer) { m.completed.With(p.labels()).Inc() }

// RotationAborted counts an aborted rotation. reason is the word of the
// roll's rotator.AbortReason ("switch-timeout", "guard-refused",
// "session-down", "kernel-error"), never derived from an error's text.
func (m *Metrics) RotationAborted(p Peer, reason string) {
	l := p.labels()
	l[LabelReason] = reason
	m.aborted.With(l).Inc()
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

// SetVerifyFailing records whether the peer's segments fail TCP-AO
// verification on the listener while its session is down.
func (m *Metrics) SetVerifyFailing(p Peer, failing bool) {
	v := 0.0
	if failing {
		v = 1
	}
	m.verifyFailing.With(p.labels()).Set(v)
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

// ControlRefused counts a refused control connection.
func (m *Metrics) ControlRefused() { m.refused.Inc() }

// ObserveKeys replaces the peer's per-key counters with keys (keys that
// are gone lose their series).
func (m *Metrics) ObserveKeys(p Peer, keys []KeyCounters) { m.kernel.setKeys(p, keys) }

// SetCountersAge records how old the peer's kernel counters (ObserveKeys,
// ObserveSocket) are.
func (m *Metrics) SetCountersAge(p Peer, age time.Duration) {
	m.countersAge.With(p.labels()).Set(max(age, 0).Seconds())
}

// ObserveSocket records one socket's counters for the peer. socket names it
// as status does ("peer 192.0.2.1", "listen 0.0.0.0:179").
func (m *Metrics) ObserveSocket(p Peer, socket string, c SocketCounters) {
	m.kernel.setSocket(p, socket, c)
}

// DeleteSocket drops one socket's counters (the socket closed).
func (m *Metrics) DeleteSocket(p Peer, socket string) { m.kernel.deleteSocket(p, socket) }

// DeletePeer drops every series of the peer.
func (m *Metrics) DeletePeer(p Peer) {
	m.statesMu.Lock()
	delete(m.states, p)
	m.statesMu.Unlock()
	l := p.labels()
	for _, v := range []*prometheus.GaugeVec{m.current, m.rnext, m.keys, m.state, m.verifyFailing, m.countersAge} {
		v.DeletePartialMatch(l)
	}
	for _, v := range []*prometheus.CounterVec{m.started, m.completed, m.aborted} {
		v.DeletePartialMatch(l)
	}
	m.kernel.deletePeer(p)
}

// kernelCollector reports the kernel's counters as Prometheus counters with
// the values last observed.
type kernelCollector struct {
	keyGood, keyBad                           *prometheus.Desc
	sockGood, sockBad, sockNotFound, sockReqd *prometheus.Desc

	mu      sync.Mutex
	keys    map[Peer][]KeyCounters
	sockets map[Peer]map[string]SocketCounters
}

func newKernelCollector() *kernelCollector {
	keyL := []string{LabelPeer, LabelVRF, LabelKey, LabelSendID, LabelRecvID}
	sockL := []string{LabelPeer, LabelVRF, LabelSocket}
	return &kernelCollector{
		keyGood:      prometheus.NewDesc(NameKeyPktGood, "Segments verified with the key (TCP_AO_GET_KEYS pkt_good).", keyL, nil),
		keyBad:       prometheus.NewDesc(NameKeyPktBad, "Segments with a bad MAC for the key (pkt_bad).", keyL, nil),
		sockGood:     prometheus.NewDesc(NameSocketPktGood, "Segments verified on the socket (TCP_AO_INFO pkt_good).", sockL, nil),
		sockBad:      prometheus.NewDesc(NameSocketPktBad, "Segments with a bad MAC on the socket (pkt_bad).", sockL, nil),
		sockNotFound: prometheus.NewDesc(NameSocketPktKeyNotFound, "Signed segments for which no key matched (pkt_key_not_found).", sockL, nil),
		sockReqd:     prometheus.NewDesc(NameSocketPktAORequired, "Unsigned segments dropped because TCP-AO is required (pkt_ao_required).", sockL, nil),
		keys:         map[Peer][]KeyCounters{},
		sockets:      map[Peer]map[string]SocketCounters{},
	}
}

func (k *kernelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{k.keyGood, k.keyBad, k.sockGood, k.sockBad, k.sockNotFound, k.sockReqd} {
		ch <- d
	}
}

func (k *kernelCollector) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for p, ks := range k.keys {
		for _, c := range ks {
			lv := []string{p.Addr, p.VRF, c.Key, strconv.Itoa(int(c.SendID)), strconv.Itoa(int(c.RecvID))}
			ch <- prometheus.MustNewConstMetric(k.keyGood, prometheus.CounterValue, float64(c.PktGood), lv...)
			ch <- prometheus.MustNewConstMetric(k.keyBad, prometheus.CounterValue, float64(c.PktBad), lv...)
		}
	}
	for p, ss := range k.sockets {
		for s, c := range ss {
			lv := []string{p.Addr, p.VRF, s}
			ch <- prometheus.MustNewConstMetric(k.sockGood, prometheus.CounterValue, float64(c.PktGood), lv...)
			ch <- prometheus.MustNewConstMetric(k.sockBad, prometheus.CounterValue, float64(c.PktBad), lv...)
			ch <- prometheus.MustNewConstMetric(k.sockNotFound, prometheus.CounterValue, float64(c.PktKeyNotFound), lv...)
			ch <- prometheus.MustNewConstMetric(k.sockReqd, prometheus.CounterValue, float64(c.PktAORequired), lv...)
		}
	}
}

func (k *kernelCollector) setKeys(p Peer, keys []KeyCounters) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(keys) == 0 {
		delete(k.keys, p)
		return
	}
	// Two keys with the same labels would make the scrape fail; the last
	// one wins.
	seen := map[KeyCounters]int{}
	var out []KeyCounters
	for _, c := range keys {
		id := KeyCounters{Key: c.Key, SendID: c.SendID, RecvID: c.RecvID}
		if i, ok := seen[id]; ok {
			out[i] = c
			continue
		}
		seen[id] = len(out)
		out = append(out, c)
	}
	k.keys[p] = out
}

func (k *kernelCollector) setSocket(p Peer, socket string, c SocketCounters) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sockets[p] == nil {
		k.sockets[p] = map[string]SocketCounters{}
	}
	k.sockets[p][socket] = c
}

func (k *kernelCollector) deleteSocket(p Peer, socket string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.sockets[p], socket)
	if len(k.sockets[p]) == 0 {
		delete(k.sockets, p)
	}
}

func (k *kernelCollector) deletePeer(p Peer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, p)
	delete(k.sockets, p)
}
