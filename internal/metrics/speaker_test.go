package metrics

import (
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
