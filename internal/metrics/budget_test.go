package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// steadyPeers feeds m what the daemon publishes of n established peers
// with keys keys each, steady after one completed roll: every setter an
// established session's scrape and roll events call, the kept keys
// (none in steady state) and an abort's counter on every other peer.
func steadyPeers(m *Metrics, n, keys int) []Peer {
	ps := make([]Peer, n)
	ks := make([]KeyCounters, keys)
	for i := range ps {
		p := Peer{Addr: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
		if i%3 == 1 {
			p.VRF = "blue"
		}
		ps[i] = p
		cur, rn := uint8(1), uint8(2)
		m.SetPeerKeys(p, &cur, &rn, keys)
		m.RotationStarted(p)
		if i%2 == 1 {
			m.RotationAborted(p, "switch-timeout")
			m.RotationStarted(p)
		}
		m.RotationCompleted(p)
		m.SetRotationState(p, "steady")
		m.SetRollAttempts(p, 0, "")
		m.SetSendCoverageEnd(p, time.Unix(1800000000, 0))
		m.SetVerifyFailing(p, false)
		m.SetKeyNotFound(p, false)
		for k := range ks {
			ks[k] = KeyCounters{SendID: uint8(k), RecvID: uint8(k + 100), PktGood: uint64(i + k)}
		}
		m.ObserveSession(p, SocketCounters{PktGood: uint64(i)}, ks, time.Unix(1700000000, 0))
	}
	m.SetKept(nil)
	return ps
}

// textSeriesPerPeer scrapes h in the text format and counts, by peer (its
// peer and vrf labels), the series that carry its peer label, in every
// family, and which families they are in.
func textSeriesPerPeer(t *testing.T, h http.Handler) (map[[2]string]int, []string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: HTTP %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	per := map[[2]string]int{}
	var fams []string
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var peer, vrf string
			has := false
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case LabelPeer:
					peer, has = l.GetValue(), true
				case LabelVRF:
					vrf = l.GetValue()
				}
			}
			if has {
				per[[2]string{peer, vrf}]++
				if !slices.Contains(fams, name) {
					fams = append(fams, name)
				}
			}
		}
	}
	slices.Sort(fams)
	return per, fams
}

// TestSeriesPerPeer: at route-server size a scrape's cost and aokeyd's
// memory go with the series per peer (issue 52 item 3: 23 per peer, 94,216
// series at 4,096 peers with 4 keys). By default a peer has at most
// MaxDefaultPerPeer (8) series, whatever its key count and roll history,
// and none of PerKeyFamilies; per_key adds those, two series per key.
func TestSeriesPerPeer(t *testing.T) {
	tests := []struct {
		name        string
		perKey      bool
		peers, keys int
		most        int // the most series of one peer
	}{
		{"one key", false, 16, 1, MaxDefaultPerPeer},
		{"four keys", false, 64, 4, MaxDefaultPerPeer},
		{"eight keys", false, 16, 8, MaxDefaultPerPeer},
		// 8 + rnext, installed, age, 2 socket counters, started,
		// completed, aborted (every other peer), 2 per key.
		{"per_key, four keys", true, 64, 4, MaxDefaultPerPeer + 8 + 2*4},
		{"per_key, eight keys", true, 16, 8, MaxDefaultPerPeer + 8 + 2*8},
	}
	if MaxDefaultPerPeer > 8 {
		t.Fatalf("MaxDefaultPerPeer %d: issue 52 allows 8", MaxDefaultPerPeer)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(prometheus.NewRegistry(), Options{PerKey: tt.perKey})
			if err != nil {
				t.Fatal(err)
			}
			ps := steadyPeers(m, tt.peers, tt.keys)
			per, fams := textSeriesPerPeer(t, m.Handler())
			if len(per) != len(ps) {
				t.Errorf("%d peers have series, want %d", len(per), len(ps))
			}
			most, who := 0, [2]string{}
			for p, n := range per {
				if n > most {
					most, who = n, p
				}
			}
			if most > tt.most || (tt.perKey && most != tt.most) {
				t.Errorf("peer %v has %d series, want at most %d", who, most, tt.most)
			}
			for _, name := range PerKeyFamilies() {
				if slices.Contains(fams, name) != tt.perKey {
					t.Errorf("per_key %v: family %s served: %v", tt.perKey, name, !tt.perKey)
				}
			}
			t.Logf("%d peers x %d keys: at most %d series per peer, in %s", tt.peers, tt.keys, most, strings.Join(fams, " "))
		})
	}
}
