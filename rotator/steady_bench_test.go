package rotator

import (
	"log/slog"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// BenchmarkSteadyStep is one steady session's periodic check (read the
// socket, plan, nothing to do) with four keys, on the in-memory socket: the
// user-space share of what every session costs every Config.Steady.
func BenchmarkSteadyStep(b *testing.B) {
	keys := []DesiredKey{dk(mkKey(peerA, 1, 1, "steady-1")), dk(mkKey(peerA, 2, 2, "steady-2")),
		dk(mkKey(peerA, 3, 3, "steady-3")), dk(mkKey(peerA, 4, 4, "steady-4"))}
	s := newEstablished(keys[0].Key)
	for _, k := range keys[1:] {
		if err := s.AddKey(k.Key, tcpao.AddOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	d := Desired{Socket: "peer", Kind: Established, Keys: keys, WantCurrent: ID(1), WantRNext: ID(1)}
	m := newMachine(pid("p"), s, d, testCfg(), nil, nil, slog.New(slog.DiscardHandler), t0)
	m.step(t0)
	if m.st.State != StateSteady {
		b.Fatalf("state %s, want steady", m.st.State)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.step(t0)
	}
}
