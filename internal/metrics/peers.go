package metrics

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The per-peer series (a few per peer, two per key, four per socket: tens
// of thousands on a large PE) are not client_golang collectors: a
// registry's Gather builds each series' protobuf, hashes and checks its
// labels and sorts every family, on every scrape, which at 4,096 peers cost
// seconds of CPU on a slow machine. They live in a store that keeps each
// series' labels, built once when the series appears, and its value,
// updated in place; a family's order, and its series' text up to the
// value, are recomputed only when a series comes or goes. A text scrape
// (peers_text.go) copies that text and formats the values; a protobuf one
// (Gatherer) copies values into freshly allocated protobufs that share the
// series' label pairs (built by the first, immutable after), a few
// allocations per family.

// row is one series. Its value is kept in its family's dense vals (at
// idx), so that a scrape reads values and text sequentially.
type row struct {
	fam    *family
	idx    int
	key    string           // the label values in label-name order, NUL-separated: its key in rows, and its order
	values []string         // label values in the family's label order
	labels []*dto.LabelPair // sorted by name, as client_golang orders them; built by the first gather, then never changed
}

func (r *row) set(v float64) { r.fam.vals[r.idx] = v }
func (r *row) add(v float64) { r.fam.vals[r.idx] += v }

// family is one per-peer metric.
type family struct {
	name, help string
	typ        dto.MetricType
	ages       bool     // vals hold Unix times; a scrape serves the seconds since
	labels     []string // label names in the order values are given
	byName     []int    // indexes into labels, sorted by label name
	rows       map[string]*row
	vals       []float64 // every row's value, by row.idx
	free       []int     // indexes in vals of dropped rows
	head       []byte    // the family's HELP and TYPE lines
	// sorted are the rows in client_golang's order (nil: a series came or
	// went since the last sort); blob holds each one's text up to its value
	// ("name{labels} "), the k-th ending at ends[k], and order its idx.
	sorted []*row
	blob   []byte
	ends   []int
	order  []int
}

func newFamily(name, help string, typ dto.MetricType, labels ...string) *family {
	f := &family{name: name, help: help, typ: typ, labels: labels, rows: map[string]*row{}}
	f.byName = make([]int, len(labels))
	for i := range f.byName {
		f.byName[i] = i
	}
	sort.Slice(f.byName, func(a, b int) bool { return labels[f.byName[a]] < labels[f.byName[b]] })
	kind := " gauge\n"
	if f.typ == dto.MetricType_COUNTER {
		kind = " counter\n"
	}
	f.head = []byte("# HELP " + name + " " + helpEscaper.Replace(help) + "\n# TYPE " + name + kind)
	return f
}

// with returns the series with these label values, created at 0.
func (f *family) with(values ...string) *row {
	// The key orders series as client_golang does (by their values in
	// label-name order; NUL sorts before any byte a value has).
	var kb strings.Builder
	n := len(values)
	for _, v := range values {
		n += len(v)
	}
	kb.Grow(n)
	for i, j := range f.byName {
		if i > 0 {
			kb.WriteByte(0)
		}
		kb.WriteString(values[j])
	}
	k := kb.String()
	if r := f.rows[k]; r != nil {
		return r
	}
	r := &row{fam: f, key: k, values: slices.Clone(values)}
	if n := len(f.free); n > 0 {
		r.idx, f.free = f.free[n-1], f.free[:n-1]
		f.vals[r.idx] = 0
	} else {
		r.idx = len(f.vals)
		f.vals = append(f.vals, 0)
	}
	f.rows[k] = r
	f.sorted = nil
	return r
}

// drop removes the series r (nil: nothing).
func (f *family) drop(r *row) {
	if r == nil {
		return
	}
	if f.rows[r.key] != r {
		return // dropped already
	}
	delete(f.rows, r.key)
	f.free = append(f.free, r.idx)
	f.sorted = nil
}

// sort puts the series in client_golang's order (by their label values in
// label-name order) if a series came or went since the last sort.
func (f *family) sort() {
	if f.sorted != nil {
		return
	}
	f.sorted = make([]*row, 0, len(f.rows))
	for _, r := range f.rows {
		f.sorted = append(f.sorted, r)
	}
	slices.SortFunc(f.sorted, func(a, b *row) int { return strings.Compare(a.key, b.key) })
	size := 0
	for _, r := range f.sorted {
		size += len(f.name) + len(r.key) + 8*len(r.values)
	}
	if cap(f.blob) < size {
		f.blob = make([]byte, 0, size+size/8)
	}
	if cap(f.ends) < len(f.sorted) {
		f.ends = make([]int, 0, len(f.sorted)+len(f.sorted)/8)
		f.order = make([]int, 0, cap(f.ends))
	}
	f.blob, f.ends, f.order = f.blob[:0], f.ends[:0], f.order[:0]
	for _, r := range f.sorted {
		f.blob = append(f.blob, f.name...)
		f.blob = f.appendLabels(f.blob, r)
		f.blob = append(f.blob, ' ')
		f.ends = append(f.ends, len(f.blob))
		f.order = append(f.order, r.idx)
	}
}

// gather returns the family's series as client_golang's registry would
// (label pairs sorted by name, series by their label values in that
// order), or nil when it has none.
func (f *family) gather(now float64) *dto.MetricFamily {
	n := len(f.rows)
	if n == 0 {
		return nil
	}
	f.sort()
	ms := make([]dto.Metric, n)
	ptrs := make([]*dto.Metric, n)
	vals := make([]float64, n)
	var gauges []dto.Gauge
	var counters []dto.Counter
	if f.typ == dto.MetricType_COUNTER {
		counters = make([]dto.Counter, n)
	} else {
		gauges = make([]dto.Gauge, n)
	}
	for i, r := range f.sorted {
		vals[i] = f.value(r.idx, now)
		m := &ms[i]
		if r.labels == nil {
			r.labels = make([]*dto.LabelPair, len(r.values))
			for i, j := range f.byName {
				r.labels[i] = &dto.LabelPair{Name: &f.labels[j], Value: &r.values[j]}
			}
		}
		m.Label = r.labels
		if counters != nil {
			counters[i].Value = &vals[i]
			m.Counter = &counters[i]
		} else {
			gauges[i].Value = &vals[i]
			m.Gauge = &gauges[i]
		}
		ptrs[i] = m
	}
	return &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: &f.typ, Metric: ptrs}
}

// value is the series at idx as served at now (Unix seconds).
func (f *family) value(idx int, now float64) float64 {
	if f.ages {
		return max(now-f.vals[idx], 0)
	}
	return f.vals[idx]
}

// keyRows are one key's two counters.
type keyRows struct {
	id        KeyCounters // Key, SendID, RecvID only
	good, bad *row
}

// peerRows are one peer's series (nil: none yet).
type peerRows struct {
	current, rnext, installed *row
	state                     *row
	verify, age               *row
	notFound                  *row
	attempts, coverage        *row
	started, completed        *row
	aborted                   map[string]*row
	keys                      []keyRows
	sockets                   []socketRows
}

// socketRows are one socket's four counters.
type socketRows struct {
	name string
	rows [4]*row
}

// peerStore holds every per-peer series.
type peerStore struct {
	mu    sync.Mutex
	peers map[Peer]*peerRows

	current, rnext, installed, state, verify, age *family
	notFound                                      *family
	attempts, coverage                            *family
	started, completed, aborted                   *family
	keyGood, keyBad                               *family
	sockGood, sockBad, sockNotFound, sockReqd     *family
}

func newPeerStore() *peerStore {
	g, c := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	keyL := []string{LabelPeer, LabelVRF, LabelKey, LabelSendID, LabelRecvID}
	sockL := []string{LabelPeer, LabelVRF, LabelSocket}
	s := &peerStore{
		peers:     map[Peer]*peerRows{},
		current:   newFamily(NamePeerCurrentKeyID, "SendID of the peer's Current_key (-1: none).", g, LabelPeer, LabelVRF),
		rnext:     newFamily(NamePeerRNextKeyID, "RecvID of the peer's RNext_key (-1: none).", g, LabelPeer, LabelVRF),
		installed: newFamily(NamePeerKeys, "TCP-AO keys installed on the peer's established socket.", g, LabelPeer, LabelVRF),
		state:     newFamily(NameRotationState, "1 for the rotation state the peer is in.", g, LabelPeer, LabelVRF, LabelState),
		notFound: newFamily(NamePeerKeyNotFound,
			"1 while the peer's session is down, no other managed peer's is, and the listeners count segments whose KeyID matches no key (the peer's key IDs are not mirrored).", g, LabelPeer, LabelVRF),
		verify: newFamily(NamePeerVerifyFailing,
			"1 while the peer's session is down and its segments fail TCP-AO verification on the listener with a bad MAC (the secret, the algorithm or tcp_options differ).", g, LabelPeer, LabelVRF),
		age: newFamily(NamePeerCountersAge,
			"Seconds since the peer's key and socket pkt counters were read from the kernel (served from the rotation machine's last poll; read on the scrape, age 0, when older than two steady periods).", g, LabelPeer, LabelVRF),
		attempts: newFamily(NameRotationFailedAttempts,
			"Aborted attempts of the peer's roll since its last completed roll (0: none), labelled with the last abort's reason.", g, LabelPeer, LabelVRF, LabelReason),
		coverage: newFamily(NameSendCoverageEnd,
			"Unix time from which the peer has no key to send with (the end of continuous send-lifetime coverage from now; +Inf: never).", g, LabelPeer, LabelVRF),
		started:      newFamily(NameRotationsStarted, "Key rotations started.", c, LabelPeer, LabelVRF),
		completed:    newFamily(NameRotationsCompleted, "Key rotations completed (old key retired).", c, LabelPeer, LabelVRF),
		aborted:      newFamily(NameRotationsAborted, "Key rotations aborted, by reason.", c, LabelPeer, LabelVRF, LabelReason),
		keyGood:      newFamily(NameKeyPktGood, "Segments verified with the key (TCP_AO_GET_KEYS pkt_good).", c, keyL...),
		keyBad:       newFamily(NameKeyPktBad, "Segments with a bad MAC for the key (pkt_bad).", c, keyL...),
		sockGood:     newFamily(NameSocketPktGood, "Segments verified on the socket (TCP_AO_INFO pkt_good).", c, sockL...),
		sockBad:      newFamily(NameSocketPktBad, "Segments with a bad MAC on the socket (pkt_bad).", c, sockL...),
		sockNotFound: newFamily(NameSocketPktKeyNotFound, "Signed segments for which no key matched (pkt_key_not_found).", c, sockL...),
		sockReqd:     newFamily(NameSocketPktAORequired, "Unsigned segments dropped because TCP-AO is required (pkt_ao_required).", c, sockL...),
	}
	s.age.ages = true
	return s
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// families are the per-peer families, by name (as a registry orders them).
func (s *peerStore) families() []*family {
	fs := []*family{s.current, s.rnext, s.installed, s.state, s.verify, s.notFound, s.age, s.attempts, s.coverage, s.started, s.completed, s.aborted,
		s.keyGood, s.keyBad, s.sockGood, s.sockBad, s.sockNotFound, s.sockReqd}
	slices.SortFunc(fs, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	return fs
}

// peer returns p's rows, created empty; s.mu is held.
func (s *peerStore) peer(p Peer) *peerRows {
	r := s.peers[p]
	if r == nil {
		r = &peerRows{}
		s.peers[p] = r
	}
	return r
}

// set sets *r (created in f with the peer's labels and extra on first use)
// to v; s.mu is held.
func (s *peerStore) set(f *family, r **row, p Peer, v float64) {
	if *r == nil {
		*r = f.with(p.Addr, p.VRF)
	}
	(*r).set(v)
}

func (s *peerStore) setPeerKeys(p Peer, current, rnext, installed float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	s.set(s.current, &pr.current, p, current)
	s.set(s.rnext, &pr.rnext, p, rnext)
	s.set(s.installed, &pr.installed, p, installed)
}

func (s *peerStore) setState(p Peer, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	if pr.state != nil && pr.state.values[2] == state {
		return
	}
	s.state.drop(pr.state)
	pr.state = s.state.with(p.Addr, p.VRF, state)
	pr.state.set(1)
}

// setAttempts sets p's one failed-attempts series, whose reason label
// follows the latest abort.
func (s *peerStore) setAttempts(p Peer, n float64, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	if pr.attempts == nil || pr.attempts.values[2] != reason {
		s.attempts.drop(pr.attempts)
		pr.attempts = s.attempts.with(p.Addr, p.VRF, reason)
	}
	pr.attempts.set(n)
}

func (s *peerStore) setCoverage(p Peer, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(s.coverage, &s.peer(p).coverage, p, v)
}

func (s *peerStore) setKeyNotFound(p Peer, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(s.notFound, &s.peer(p).notFound, p, v)
}

func (s *peerStore) setVerify(p Peer, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(s.verify, &s.peer(p).verify, p, v)
}

// setReadAt records when p's counters were read (Unix seconds): a scrape
// serves their age then.
func (s *peerStore) setReadAt(p Peer, at float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(s.age, &s.peer(p).age, p, at)
}

func (s *peerStore) inc(p Peer, which func(*peerRows) (*family, **row)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, r := which(s.peer(p))
	if *r == nil {
		*r = f.with(p.Addr, p.VRF)
	}
	(*r).add(1)
}

func (s *peerStore) incAborted(p Peer, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	if pr.aborted == nil {
		pr.aborted = map[string]*row{}
	}
	r := pr.aborted[reason]
	if r == nil {
		r = s.aborted.with(p.Addr, p.VRF, reason)
		pr.aborted[reason] = r
	}
	r.add(1)
}

// setKeys replaces p's key series with keys (the last of two keys with the
// same labels wins). A key set unchanged since the last call (every poll
// and scrape in steady state) only updates values.
func (s *peerStore) setKeys(p Peer, keys []KeyCounters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setKeysLocked(p, s.peer(p), keys)
}

// observeSession sets a session's socket counters (socket "established"),
// key counters and their read time under one lock.
func (s *peerStore) observeSession(p Peer, sock SocketCounters, keys []KeyCounters, at float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	s.setSocketLocked(p, pr, "established", sock)
	s.setKeysLocked(p, pr, keys)
	s.set(s.age, &pr.age, p, at)
}

func (s *peerStore) setKeysLocked(p Peer, pr *peerRows, keys []KeyCounters) {
	same := len(keys) == len(pr.keys)
	for i := 0; same && i < len(keys); i++ {
		same = pr.keys[i].id == KeyCounters{Key: keys[i].Key, SendID: keys[i].SendID, RecvID: keys[i].RecvID}
	}
	if !same {
		old := pr.keys
		pr.keys = make([]keyRows, 0, len(keys))
		for _, k := range old {
			s.keyGood.drop(k.good)
			s.keyBad.drop(k.bad)
		}
		for _, c := range keys {
			id := KeyCounters{Key: c.Key, SendID: c.SendID, RecvID: c.RecvID}
			// A duplicate gets the same rows (with returns the existing
			// series); the last one's values win below.
			send, recv := strconv.Itoa(int(c.SendID)), strconv.Itoa(int(c.RecvID))
			name := c.Key
			if name == "" {
				name = send + "/" + recv
			}
			lv := []string{p.Addr, p.VRF, name, send, recv}
			pr.keys = append(pr.keys, keyRows{id: id, good: s.keyGood.with(lv...), bad: s.keyBad.with(lv...)})
		}
	}
	for i, c := range keys {
		pr.keys[i].good.set(float64(c.PktGood))
		pr.keys[i].bad.set(float64(c.PktBad))
	}
}

func (s *peerStore) setSocket(p Peer, socket string, c SocketCounters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setSocketLocked(p, s.peer(p), socket, c)
}

func (s *peerStore) setSocketLocked(p Peer, pr *peerRows, socket string, c SocketCounters) {
	var rs *[4]*row
	for i := range pr.sockets {
		if pr.sockets[i].name == socket {
			rs = &pr.sockets[i].rows
		}
	}
	if rs == nil {
		pr.sockets = append(pr.sockets, socketRows{name: socket})
		rs = &pr.sockets[len(pr.sockets)-1].rows
		for i, f := range []*family{s.sockGood, s.sockBad, s.sockNotFound, s.sockReqd} {
			rs[i] = f.with(p.Addr, p.VRF, socket)
		}
	}
	for i, v := range [4]uint64{c.PktGood, c.PktBad, c.PktKeyNotFound, c.PktAORequired} {
		rs[i].set(float64(v))
	}
}

func (s *peerStore) deleteSocket(p Peer, socket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peers[p]
	if pr == nil {
		return
	}
	for i := range pr.sockets {
		if pr.sockets[i].name == socket {
			s.dropSocket(&pr.sockets[i].rows)
			pr.sockets = slices.Delete(pr.sockets, i, i+1)
			return
		}
	}
}

func (s *peerStore) dropSocket(rs *[4]*row) {
	for i, f := range []*family{s.sockGood, s.sockBad, s.sockNotFound, s.sockReqd} {
		f.drop(rs[i])
	}
}

func (s *peerStore) deletePeer(p Peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peers[p]
	if pr == nil {
		return
	}
	delete(s.peers, p)
	s.current.drop(pr.current)
	s.rnext.drop(pr.rnext)
	s.installed.drop(pr.installed)
	s.state.drop(pr.state)
	s.verify.drop(pr.verify)
	s.notFound.drop(pr.notFound)
	s.age.drop(pr.age)
	s.attempts.drop(pr.attempts)
	s.coverage.drop(pr.coverage)
	s.started.drop(pr.started)
	s.completed.drop(pr.completed)
	for _, r := range pr.aborted {
		s.aborted.drop(r)
	}
	for _, k := range pr.keys {
		s.keyGood.drop(k.good)
		s.keyBad.drop(k.bad)
	}
	for i := range pr.sockets {
		s.dropSocket(&pr.sockets[i].rows)
	}
}

// gather returns every per-peer family that has series.
func (s *peerStore) gather(now float64) []*dto.MetricFamily {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*dto.MetricFamily
	for _, f := range s.families() {
		if mf := f.gather(now); mf != nil {
			out = append(out, mf)
		}
	}
	return out
}

// gatherer serves a registry's metrics and the per-peer series.
type gatherer struct {
	m   *Metrics
	reg prometheus.Gatherer
}

// Gather runs the OnCollect hook, then gathers the registry and the
// per-peer series, one scrape at a time.
func (g gatherer) Gather() ([]*dto.MetricFamily, error) {
	g.m.scrapeMu.Lock()
	defer g.m.scrapeMu.Unlock()
	if g.m.hook != nil {
		g.m.hook()
	}
	mfs, err := g.reg.Gather()
	mfs = append(mfs, g.m.peers.gather(unixSeconds(g.m.now()))...)
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}

// peerNames claims the per-peer metric names on the registry (it describes
// them and collects nothing), so that nothing else registers a metric of
// the same name that Gatherer would serve twice.
type peerNames struct{ s *peerStore }

func (n peerNames) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range n.s.families() {
		ch <- prometheus.NewDesc(f.name, f.help, f.labels, nil)
	}
}

func (n peerNames) Collect(chan<- prometheus.Metric) {}
