package bgp

import "testing"

func TestParseSessionState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SessionState
	}{
		{"Established", StateEstablished}, {"established", StateEstablished}, {"ESTABLISHED", StateEstablished},
		{"OpenSent", StateOpenSent}, {"OpenConfirm", StateOpenConfirm}, {"Active", StateActive}, {"Connect", StateConnect},
		{"Idle", StateIdle}, {"Down", StateUnknown}, {"", StateUnknown}, {"state(7)", StateUnknown},
	} {
		if got := ParseSessionState(tc.in); got != tc.want {
			t.Errorf("ParseSessionState(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for s := StateUnknown; s <= StateEstablished; s++ {
		if got := ParseSessionState(s.String()); got != s {
			t.Errorf("round trip of %v: %v", s, got)
		}
	}
}
