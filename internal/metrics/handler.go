package metrics

import (
	"bytes"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Handler serves the metrics over HTTP, as aokeyd's metrics listener does.
// A scrape that takes the text format (what Prometheus asks for unless told
// otherwise) gets the registry's metrics through expfmt and the per-peer
// series written straight from the store, each series' label text built
// once when it appeared: no protobuf per series, no label checks, no sort.
// It is built in memory a few families at a time and sent uncompressed:
// the store's lock is held while a family is written into the buffer,
// never while a slow client reads, and the buffer holds the largest
// family, not the whole page (at 4,096 peers the page was 2.8 MB kept
// between scrapes). Any other format (protobuf, OpenMetrics) is served by
// promhttp from Gatherer.
func (m *Metrics) Handler() http.Handler {
	slow := promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		if format.FormatType() != expfmt.TypeTextPlain {
			slow.ServeHTTP(w, r)
			return
		}
		// The last scrape's buffer (fresh memory each scrape costs page
		// faults), taken for this one; a scrape running beside it builds
		// in a buffer of its own.
		bp := m.textBuf.Swap(nil)
		if bp == nil {
			bp = new([]byte)
		}
		defer m.textBuf.Store(bp)
		b, now, err := m.appendRegistry((*bp)[:0], format)
		if err != nil {
			*bp = b
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(format))
		*bp, _ = m.peers.writeText(w, b, now) // a client gone: nothing to tell it
	})
}

// appendRegistry is the start of one text scrape: the OnCollect hook and
// the registry's metrics in format; now is the scrape's time, at which the
// per-peer series' ages are taken.
func (m *Metrics) appendRegistry(b []byte, format expfmt.Format) ([]byte, float64, error) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	if m.hook != nil {
		m.hook()
	}
	now := unixSeconds(m.now())
	mfs, err := m.reg.Gather()
	if err != nil {
		return b, now, err
	}
	buf := bytes.NewBuffer(b)
	enc := expfmt.NewEncoder(buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return buf.Bytes(), now, err
		}
	}
	return buf.Bytes(), now, nil
}
