package metrics

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestHandlerTextLarge: a text scrape larger than writeText's flush size
// (many writes) is, to the byte, expfmt's text of what Gatherer serves,
// with and without per_key; the buffer kept for the next scrape is smaller
// than the page (it holds a few families at a time, not the page).
func TestHandlerTextLarge(t *testing.T) {
	for _, perKey := range []bool{false, true} {
		m, err := New(prometheus.NewPedanticRegistry(), Options{PerKey: perKey})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1700000000, 0)
		m.SetClock(func() time.Time { return now })
		steadyPeers(m, 1000, 4)
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		mfs, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		// The registry's families come first, then the per-peer ones.
		var reg, peer []*dto.MetricFamily
		for _, mf := range mfs {
			if slices.ContainsFunc(m.peers.families(), func(f *family) bool { return f.name == mf.GetName() }) {
				peer = append(peer, mf)
			} else {
				reg = append(reg, mf)
			}
		}
		body, want := rec.Body.String(), text(t, append(reg, peer...))
		if len(body) < 4*flushAt {
			t.Fatalf("per_key %v: page of %d bytes, want several flushes of %d", perKey, len(body), flushAt)
		}
		if body != want {
			t.Errorf("per_key %v: text scrape (%d bytes) differs from expfmt's text of the gathered families (%d bytes)", perKey, len(body), len(want))
		}
		if kept := cap(*m.textBuf.Load()); kept >= len(body)/2 {
			t.Errorf("per_key %v: the scrape keeps a buffer of %d bytes for a page of %d", perKey, kept, len(body))
		}
	}
}
