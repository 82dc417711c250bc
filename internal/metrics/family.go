package metrics

import (
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// The per-peer series (a few per peer, two per key, four per socket: tens
// of thousands on a large PE) are not client_golang collectors: a
// registry's Gather builds each series' protobuf, hashes and checks its
// labels and sorts every family, on every scrape, which at 4,096 peers cost
// seconds of CPU on a slow machine. Nor does a series keep its own copy of
// its labels (their text, their protobuf pairs): at 4,096 peers with 4
// keys that was 264 bytes a series before any scrape and 4.5 times that
// after a text and a protobuf one (75,000 series: 20 MiB, then 55 MiB).
//
// A series is a row of 32 bytes: its family, where its value is, and
// pointers to labels shared with others: its peer's (peer and vrf, one
// copy per peer) and the family's other labels (a key's name and IDs, a
// socket, a state, a reason), each value interned once for the store and
// each combination of them once for the family (a row pointed to its
// three, 48 bytes a row: 0.5 MiB more at 32,768 series).
// Each shared label keeps its text (name="value", escaped) and, from the
// first protobuf gather on, its protobuf pair. A family keeps its rows in
// client_golang's order (recomputed only when a series comes or goes) and
// their values densely; a text scrape (peers_text.go) writes each series
// from those shared pieces into the scrape's buffer, a protobuf one
// (gather) points each series at the shared pairs.

// label is one label value with its text in a series and, from the first
// protobuf gather on, its pair. Immutable once made, but for pair.
type label struct {
	value string
	text  string         // name="value", escaped as the text format wants
	pair  *dto.LabelPair // built by the first gather that needs it
}

func newLabel(name, value string) *label {
	return &label{value: value, text: name + `="` + labelEscaper.Replace(value) + `"`}
}

// labelPair is l's pair for label name.
func (l *label) labelPair(name *string) *dto.LabelPair {
	if l.pair == nil {
		l.pair = &dto.LabelPair{Name: name, Value: &l.value}
	}
	return l.pair
}

// peerLabels are one peer's labels, shared by every series of the peer.
type peerLabels struct {
	peer, vrf *label
	both      string // peer="...",vrf="...": the labels of a family with no others
}

// newPeerLabels makes p's labels with vrf, the store's interned label of
// p.VRF (one for every peer of the VRF, not one each). The peer label's
// text and value are pieces of both, one string: a peer's labels were
// five strings and two labels of its own, 100 bytes a peer more.
func newPeerLabels(p Peer, vrf *label) *peerLabels {
	text := LabelPeer + `="` + labelEscaper.Replace(p.Addr) + `"`
	both := text + "," + vrf.text
	text = both[:len(text)]
	value := p.Addr
	if v := text[len(LabelPeer)+2 : len(text)-1]; v == value {
		value = v // nothing escaped
	}
	return &peerLabels{peer: &label{value: value, text: text}, vrf: vrf, both: both}
}

// maxExtra is the most labels a family has beside peer and vrf.
const maxExtra = 3

// row is one series. Its label values are its peer's and extra, in the
// family's label order (peer, vrf, then the others).
type row struct {
	fam   *family
	idx   int32 // its value in fam.vals
	pos   int32 // its place in fam.rows
	peer  *peerLabels
	extra *[maxExtra]*label // the family's interned tuple (nil: no others)
}

func (r *row) set(v float64) { r.fam.vals[r.idx] = v }
func (r *row) add(v float64) { r.fam.vals[r.idx] += v }

// label is r's label j (an index into its family's labels).
func (r *row) label(j int) *label {
	switch j {
	case 0:
		return r.peer.peer
	case 1:
		return r.peer.vrf
	}
	return r.extra[j-2]
}

// family is one per-peer metric.
type family struct {
	name, help string
	typ        dto.MetricType
	ages       bool     // vals hold Unix times; a scrape serves the seconds since
	labels     []string // peer, vrf, then the others, in the order values are given
	byName     []int    // indexes into labels, sorted by label name
	rows       []*row   // every series, in no order (row.pos is its index)
	vals       []float64
	free       []int32 // indexes in vals of dropped rows
	head       []byte  // the family's HELP and TYPE lines
	// tuples intern the rows' extra labels (as the store interns each
	// label: few, bounded by the keys and listeners there are).
	tuples map[[maxExtra]*label]*[maxExtra]*label
	// detail marks a family exported only with Options.PerKey; off is
	// detail without it: the family never has a series (its setters
	// return before they make one).
	detail, off bool
	// textLen is the length of every series' text up to its value
	// (name{labels} ), what a text scrape writes besides the values.
	textLen int
	// sorted are the rows in client_golang's order: by their label values
	// in label-name order (nil: a series came or went since); blob holds
	// each one's labels text ({labels} , without the family's name: a
	// third of the blob at 4,096 peers), the k-th ending at ends[k], its
	// value at vals[order[k]]: a text scrape writes the name, copies the
	// labels and formats the value, reading three arrays in order (a
	// pointer chased per series, to its row or its labels, cost it three
	// to four times the CPU at 4,096 peers).
	sorted []*row
	blob   []byte
	ends   []int32
	order  []int32
}

func newFamily(name, help string, typ dto.MetricType, extra ...string) *family {
	if len(extra) > maxExtra {
		panic("metrics: family " + name + " has too many labels")
	}
	labels := append([]string{LabelPeer, LabelVRF}, extra...)
	f := &family{name: name, help: help, typ: typ, labels: labels}
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

// add returns a new series of p with the extra labels, at 0. Callers keep
// at most one series per label set (a peer's rows say which it has).
func (f *family) add(p *peerLabels, extra ...*label) *row {
	r := &row{fam: f, peer: p, pos: int32(len(f.rows))}
	if len(extra) > 0 {
		var t [maxExtra]*label
		copy(t[:], extra)
		r.extra = f.tuple(t)
	}
	if n := len(f.free); n > 0 {
		r.idx, f.free = f.free[n-1], f.free[:n-1]
		f.vals[r.idx] = 0
	} else {
		r.idx = int32(len(f.vals))
		f.vals = append(f.vals, 0)
	}
	f.rows = append(f.rows, r)
	f.textLen += f.rowTextLen(r)
	f.sorted = nil
	return r
}

// tuple is the family's interned copy of t.
func (f *family) tuple(t [maxExtra]*label) *[maxExtra]*label {
	if p := f.tuples[t]; p != nil {
		return p
	}
	if f.tuples == nil {
		f.tuples = map[[maxExtra]*label]*[maxExtra]*label{}
	}
	p := &t
	f.tuples[t] = p
	return p
}

// rowTextLen is the length of r's text up to its value: name{labels} .
func (f *family) rowTextLen(r *row) int {
	n := len(f.name) + len(f.labels) + 2 // {, the commas, } and the space
	for j := range f.labels {
		n += len(r.label(j).text)
	}
	return n
}

// drop removes the series r (nil, or dropped already: nothing).
func (f *family) drop(r *row) {
	if r == nil || r.pos < 0 {
		return
	}
	last := f.rows[len(f.rows)-1]
	f.rows[r.pos], last.pos = last, r.pos
	f.rows[len(f.rows)-1] = nil
	f.rows = f.rows[:len(f.rows)-1]
	f.free = append(f.free, r.idx)
	f.textLen -= f.rowTextLen(r)
	r.pos = -1
	f.sorted = nil
}

// sort puts the series in client_golang's order (by their label values in
// label-name order) if a series came or went since the last sort.
func (f *family) sort() {
	if f.sorted != nil {
		return
	}
	if cap(f.sorted) < len(f.rows) {
		f.sorted = make([]*row, 0, len(f.rows)+len(f.rows)/8)
	}
	f.sorted = append(f.sorted[:0], f.rows...)
	slices.SortFunc(f.sorted, func(a, b *row) int {
		for _, j := range f.byName {
			if c := strings.Compare(a.label(j).value, b.label(j).value); c != 0 {
				return c
			}
		}
		return 0
	})
	blobLen := f.textLen - len(f.name)*len(f.sorted)
	if cap(f.blob) < blobLen || cap(f.blob) > 2*blobLen {
		f.blob = make([]byte, 0, blobLen)
	}
	if cap(f.ends) < len(f.sorted) || cap(f.ends) > 2*len(f.sorted) {
		f.ends = make([]int32, 0, len(f.sorted))
		f.order = make([]int32, 0, len(f.sorted))
	}
	f.blob, f.ends, f.order = f.blob[:0], f.ends[:0], f.order[:0]
	two := len(f.labels) == 2 // peer and vrf: one piece
	for _, r := range f.sorted {
		f.blob = append(f.blob, '{')
		if two {
			f.blob = append(f.blob, r.peer.both...)
		} else {
			for k, j := range f.byName {
				if k > 0 {
					f.blob = append(f.blob, ',')
				}
				f.blob = append(f.blob, r.label(j).text...)
			}
		}
		f.blob = append(f.blob, '}', ' ')
		f.ends = append(f.ends, int32(len(f.blob)))
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
	pairs := make([]*dto.LabelPair, n*len(f.labels))
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
		lp := pairs[i*len(f.labels) : (i+1)*len(f.labels) : (i+1)*len(f.labels)]
		for k, j := range f.byName {
			lp[k] = r.label(j).labelPair(&f.labels[j])
		}
		m.Label = lp
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
func (f *family) value(idx int32, now float64) float64 {
	if f.ages {
		return max(now-f.vals[idx], 0)
	}
	return f.vals[idx]
}
