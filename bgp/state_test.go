package bgp_test

import (
	"testing"

	"github.com/aokeyd/aokeyd/bgp"
)

func TestParseSessionState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bgp.SessionState
	}{
		{"Established", bgp.StateEstablished}, {"established", bgp.StateEstablished}, {"ESTABLISHED", bgp.StateEstablished},
		{"OpenSent", bgp.StateOpenSent}, {"OpenConfirm", bgp.StateOpenConfirm}, {"Active", bgp.StateActive}, {"Connect", bgp.StateConnect},
		{"Idle", bgp.StateIdle}, {"Down", bgp.StateUnknown}, {"", bgp.StateUnknown}, {"state(7)", bgp.StateUnknown},
	} {
		if got := bgp.ParseSessionState(tc.in); got != tc.want {
			t.Errorf("ParseSessionState(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for s := bgp.StateUnknown; s <= bgp.StateEstablished; s++ {
		if got := bgp.ParseSessionState(s.String()); got != s {
			t.Errorf("round trip of %v: %v", s, got)
		}
	}
}
