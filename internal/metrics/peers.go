package metrics

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// keyRows are one key's two counters.
type keyRows struct {
	id        KeyCounters // Key, SendID, RecvID only
	good, bad *row
}

// peerRows are one peer's series (nil: none yet): those of the default
// families here, the per_key ones' in detail (nil without per_key: 64
// bytes a peer, the 96-byte size class rather than the 160-byte one).
type peerRows struct {
	labels             *peerLabels
	current, state     *row
	verify, notFound   *row
	attempts, coverage *row
	sockets            []socketRows
	detail             *detailRows
}

// detailRows are a peer's series of the families only per_key exports
// (Options.PerKey).
type detailRows struct {
	rnext, installed, age *row
	started, completed    *row
	aborted               map[string]*row
	keys                  []keyRows
}

// det is pr's detail rows, made on first use.
func (pr *peerRows) det() *detailRows {
	if pr.detail == nil {
		pr.detail = &detailRows{}
	}
	return pr.detail
}

// socketRows are one socket's four counters (nil: the family is off).
type socketRows struct {
	name string
	rows [4]*row
}

// peerStore holds every per-peer series.
type peerStore struct {
	mu    sync.Mutex
	peers map[Peer]*peerRows
	// intern holds each value of a label other than peer (VRFs, key
	// names and IDs, sockets, states, reasons: few, and bounded by the
	// VRFs, keys and listeners there are), shared by every series with it.
	intern map[[2]string]*label

	current, rnext, installed, state, verify, age *family
	notFound                                      *family
	attempts, coverage                            *family
	started, completed, aborted                   *family
	keyGood, keyBad                               *family
	sockGood, sockBad, sockNotFound, sockReqd     *family
}

// newPeerStore makes the store; perKey exports the families marked detail
// (Options.PerKey), whose setters otherwise create nothing.
func newPeerStore(perKey bool) *peerStore {
	g, c := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	keyL := []string{LabelKey, LabelSendID, LabelRecvID}
	s := &peerStore{
		peers:     map[Peer]*peerRows{},
		intern:    map[[2]string]*label{},
		current:   newFamily(NamePeerCurrentKeyID, "SendID of the peer's Current_key (-1: none).", g),
		rnext:     newFamily(NamePeerRNextKeyID, "RecvID of the peer's RNext_key (-1: none).", g),
		installed: newFamily(NamePeerKeys, "TCP-AO keys installed on the peer's established socket.", g),
		state:     newFamily(NameRotationState, "1 for the rotation state the peer is in.", g, LabelState),
		notFound: newFamily(NamePeerKeyNotFound,
			"1 while the peer's session is down, no other managed peer's is, and the listeners count segments whose KeyID matches no key (the peer's key IDs are not mirrored).", g),
		verify: newFamily(NamePeerVerifyFailing,
			"1 while the peer's session is down and its segments fail TCP-AO verification on the listener with a bad MAC (the secret, the algorithm or tcp_options differ).", g),
		age: newFamily(NamePeerCountersAge,
			"Seconds since the peer's key and socket pkt counters were read from the kernel (served from the rotation machine's last poll; read on the scrape, age 0, when older than two steady periods).", g),
		attempts: newFamily(NameRotationFailedAttempts,
			"Aborted attempts of the peer's roll since its last completed roll (0: none), labelled with the last abort's reason.", g, LabelReason),
		coverage: newFamily(NameSendCoverageEnd,
			"Unix time from which the peer has no key to send with (the end of continuous send-lifetime coverage from now; +Inf: never).", g),
		started:      newFamily(NameRotationsStarted, "Key rotations started.", c),
		completed:    newFamily(NameRotationsCompleted, "Key rotations completed (old key retired).", c),
		aborted:      newFamily(NameRotationsAborted, "Key rotations aborted, by reason.", c, LabelReason),
		keyGood:      newFamily(NameKeyPktGood, "Segments verified with the key (TCP_AO_GET_KEYS pkt_good).", c, keyL...),
		keyBad:       newFamily(NameKeyPktBad, "Segments with a bad MAC for the key (pkt_bad).", c, keyL...),
		sockGood:     newFamily(NameSocketPktGood, "Segments verified on the socket (TCP_AO_INFO pkt_good).", c, LabelSocket),
		sockBad:      newFamily(NameSocketPktBad, "Segments with a bad MAC on the socket (pkt_bad).", c, LabelSocket),
		sockNotFound: newFamily(NameSocketPktKeyNotFound, "Signed segments for which no key matched (pkt_key_not_found).", c, LabelSocket),
		sockReqd:     newFamily(NameSocketPktAORequired, "Unsigned segments dropped because TCP-AO is required (pkt_ao_required).", c, LabelSocket),
	}
	s.age.ages = true
	// Off without per_key (PerKeyFamilies lists them): the per-key
	// counters, and the per-peer detail no shipped alert reads.
	for _, f := range []*family{s.rnext, s.installed, s.age, s.started, s.completed, s.aborted,
		s.keyGood, s.keyBad, s.sockGood, s.sockReqd} {
		f.detail = true
		f.off = !perKey
	}
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
		r = &peerRows{labels: newPeerLabels(p, s.label(LabelVRF, p.VRF))}
		s.peers[p] = r
	}
	return r
}

// label is the interned label name=value; s.mu is held.
func (s *peerStore) label(name, value string) *label {
	k := [2]string{name, value}
	l := s.intern[k]
	if l == nil {
		l = newLabel(name, value)
		s.intern[k] = l
	}
	return l
}

// set sets *r (created in f with the peer's labels and extra on first use)
// to v, nothing when f is off; s.mu is held.
func (s *peerStore) set(f *family, r **row, p Peer, v float64) {
	if f.off {
		return
	}
	if *r == nil {
		*r = f.add(s.peer(p).labels)
	}
	(*r).set(v)
}

func (s *peerStore) setPeerKeys(p Peer, current, rnext, installed float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	s.set(s.current, &pr.current, p, current)
	if !s.rnext.off || !s.installed.off {
		d := pr.det()
		s.set(s.rnext, &d.rnext, p, rnext)
		s.set(s.installed, &d.installed, p, installed)
	}
}

func (s *peerStore) setState(p Peer, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	if pr.state != nil && pr.state.extra[0].value == state {
		return
	}
	s.state.drop(pr.state)
	pr.state = s.state.add(pr.labels, s.label(LabelState, state))
	pr.state.set(1)
}

// setAttempts sets p's one failed-attempts series, whose reason label
// follows the latest abort.
func (s *peerStore) setAttempts(p Peer, n float64, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.peer(p)
	if pr.attempts == nil || pr.attempts.extra[0].value != reason {
		s.attempts.drop(pr.attempts)
		pr.attempts = s.attempts.add(pr.labels, s.label(LabelReason, reason))
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
	s.setAgeLocked(p, s.peer(p), at)
}

func (s *peerStore) setAgeLocked(p Peer, pr *peerRows, at float64) {
	if !s.age.off {
		s.set(s.age, &pr.det().age, p, at)
	}
}

// inc adds 1 to p's series in f, a per_key family (which picks it).
func (s *peerStore) inc(p Peer, f *family, which func(*detailRows) **row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.off {
		return
	}
	pr := s.peer(p)
	r := which(pr.det())
	if *r == nil {
		*r = f.add(pr.labels)
	}
	(*r).add(1)
}

func (s *peerStore) incAborted(p Peer, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted.off {
		return
	}
	pr := s.peer(p)
	d := pr.det()
	if d.aborted == nil {
		d.aborted = map[string]*row{}
	}
	r := d.aborted[reason]
	if r == nil {
		r = s.aborted.add(pr.labels, s.label(LabelReason, reason))
		d.aborted[reason] = r
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
	s.setAgeLocked(p, pr, at)
}

func (s *peerStore) setKeysLocked(p Peer, pr *peerRows, keys []KeyCounters) {
	if s.keyGood.off { // and keyBad: both or neither
		return
	}
	d := pr.det()
	same := len(keys) == len(d.keys)
	for i := 0; same && i < len(keys); i++ {
		same = d.keys[i].id == KeyCounters{Key: keys[i].Key, SendID: keys[i].SendID, RecvID: keys[i].RecvID}
	}
	if !same {
		old := d.keys
		d.keys = make([]keyRows, 0, len(keys))
		for _, k := range old {
			s.keyGood.drop(k.good)
			s.keyBad.drop(k.bad)
		}
	next:
		for _, c := range keys {
			id := KeyCounters{Key: c.Key, SendID: c.SendID, RecvID: c.RecvID}
			send, recv := strconv.Itoa(int(c.SendID)), strconv.Itoa(int(c.RecvID))
			name := c.Key
			if name == "" {
				name = send + "/" + recv
			}
			lv := [...]*label{s.label(LabelKey, name), s.label(LabelSendID, send), s.label(LabelRecvID, recv)}
			// A duplicate (the same labels) gets the same rows; the last
			// one's values win below.
			for _, k := range d.keys {
				if *k.good.extra == [maxExtra]*label(lv) {
					d.keys = append(d.keys, keyRows{id: id, good: k.good, bad: k.bad})
					continue next
				}
			}
			d.keys = append(d.keys, keyRows{id: id, good: s.keyGood.add(pr.labels, lv[:]...), bad: s.keyBad.add(pr.labels, lv[:]...)})
		}
	}
	for i, c := range keys {
		d.keys[i].good.set(float64(c.PktGood))
		d.keys[i].bad.set(float64(c.PktBad))
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
			if !f.off {
				rs[i] = f.add(pr.labels, s.label(LabelSocket, socket))
			}
		}
	}
	for i, v := range [4]uint64{c.PktGood, c.PktBad, c.PktKeyNotFound, c.PktAORequired} {
		if rs[i] != nil { // nil: its family is off
			rs[i].set(float64(v))
		}
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
	s.state.drop(pr.state)
	s.verify.drop(pr.verify)
	s.notFound.drop(pr.notFound)
	s.attempts.drop(pr.attempts)
	s.coverage.drop(pr.coverage)
	for i := range pr.sockets {
		s.dropSocket(&pr.sockets[i].rows)
	}
	d := pr.detail
	if d == nil {
		return
	}
	s.rnext.drop(d.rnext)
	s.installed.drop(d.installed)
	s.age.drop(d.age)
	s.started.drop(d.started)
	s.completed.drop(d.completed)
	for _, r := range d.aborted {
		s.aborted.drop(r)
	}
	for _, k := range d.keys {
		s.keyGood.drop(k.good)
		s.keyBad.drop(k.bad)
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
