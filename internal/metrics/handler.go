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
// It is built in memory (the store's lock is not held while a slow client
// reads) and sent uncompressed. Any other format (protobuf, OpenMetrics)
// is served by promhttp from Gatherer.
func (m *Metrics) Handler() http.Handler {
	slow := promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		if format.FormatType() != expfmt.TypeTextPlain {
			slow.ServeHTTP(w, r)
			return
		}
		// The last scrape's buffer (megabytes at thousands of peers: fresh
		// memory each scrape costs page faults), taken for this one; a
		// scrape running beside it builds in a buffer of its own.
		bp := m.textBuf.Swap(nil)
		if bp == nil {
			bp = new([]byte)
		}
		defer m.textBuf.Store(bp)
		var err error
		*bp, err = m.appendText((*bp)[:0], format)
		if err != nil {
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(format))
		_, _ = w.Write(*bp)
	})
}

// appendText is one text scrape: the OnCollect hook, the registry's
// metrics in format, then the per-peer series.
func (m *Metrics) appendText(b []byte, format expfmt.Format) ([]byte, error) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	if m.hook != nil {
		m.hook()
	}
	mfs, err := m.reg.Gather()
	if err != nil {
		return b, err
	}
	buf := bytes.NewBuffer(b)
	enc := expfmt.NewEncoder(buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return buf.Bytes(), err
		}
	}
	return m.peers.appendText(buf.Bytes(), unixSeconds(m.now())), nil
}
