package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSpeakerRPCs: each call counts once under its method, and the series
// is registered under NameSpeakerRPCs.
func TestSpeakerRPCs(t *testing.T) {
	m, reg := newTest(t)
	for _, method := range []string{"ListPeer", "ListPeer", "ResetPeer"} {
		m.SpeakerRPC(method)
	}
	for _, tc := range []struct {
		method string
		want   float64
	}{{"ListPeer", 2}, {"ResetPeer", 1}, {"WatchEvent", 0}} {
		if got := testutil.ToFloat64(m.speakerRPCs.WithLabelValues(tc.method)); got != tc.want {
			t.Errorf("%s{method=%q} = %v, want %v", NameSpeakerRPCs, tc.method, got, tc.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, NameSpeakerRPCs); err != nil || n != 3 {
		t.Errorf("gathered %d series of %s (err %v), want 3", n, NameSpeakerRPCs, err)
	}
}

// TestSessionCache: the session guard's cache counts are read at each
// scrape from the function given, as counters by result; without one
// there is no series.
func TestSessionCache(t *testing.T) {
	m, reg := newTest(t)
	if n, err := testutil.GatherAndCount(reg, NameSpeakerSessionCache); err != nil || n != 0 {
		t.Fatalf("series before SessionCacheFrom: %d (%v)", n, err)
	}
	hits, misses := uint64(7), uint64(2)
	m.SessionCacheFrom(func() (uint64, uint64) { return hits, misses })
	hits++
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP aokeyd_speaker_session_cache_total The session guard's questions about a peer's session, by result: hit (answered from the session state followed on the speaker's event stream) or miss (asked the speaker about the neighbor).
# TYPE aokeyd_speaker_session_cache_total counter
aokeyd_speaker_session_cache_total{result="hit"} 8
aokeyd_speaker_session_cache_total{result="miss"} 2
`), NameSpeakerSessionCache); err != nil {
		t.Error(err)
	}
}
