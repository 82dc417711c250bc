package rotator

import (
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSteadyRereadInterval: a steady machine re-reads its socket every
// Steady (±10% jitter), not every Poll; a roll in progress polls every
// Poll; and a new desired state is acted on at the next step, whatever
// Steady is (the controller wakes the runner on SetDesired).
func TestSteadyRereadInterval(t *testing.T) {
	k1 := mkKey("192.0.2.1/32", 1, 1, "steady-k1")
	k2 := mkKey("192.0.2.1/32", 2, 2, "steady-k2")
	cfg := testCfg()
	cfg.Steady = 40 * time.Second
	rnd := rand.New(rand.NewPCG(3, 4))
	s := newEstablished(k1)
	d := Desired{Socket: "peer", Kind: Established, Keys: []DesiredKey{dk(k1)}, WantCurrent: ID(1), WantRNext: ID(1)}
	m := newMachine(pid("p"), s, d, cfg, nil, rnd, slog.New(slog.DiscardHandler), t0)
	for i := range 50 {
		now := t0.Add(time.Duration(i)*time.Hour + time.Duration(i)*7*time.Millisecond)
		next := m.step(now)
		if m.st.State != StateSteady {
			t.Fatalf("state %s, want steady", m.st.State)
		}
		if w := next.Sub(now); w < 36*time.Second || w > 45*time.Second || next.Nanosecond() != 0 {
			t.Fatalf("steady re-read after %s (at %s), want Steady 40s ±10%% rounded up to a whole second", w, next)
		}
	}
	// A new key to roll to: installed and announced on the next step, and
	// the roll polls every Poll.
	now := t0.Add(100 * time.Hour)
	m.setDesired(Desired{Socket: "peer", Kind: Established, Keys: []DesiredKey{dk(k1), dk(k2)}, WantCurrent: ID(2), WantRNext: ID(2)}, now)
	next := m.step(now)
	if m.st.State != StateAnnounced {
		t.Fatalf("state %s after a new desired key, want announced", m.st.State)
	}
	if w := next.Sub(now); w != cfg.Poll {
		t.Fatalf("announced: next read after %s, want Poll %s", w, cfg.Poll)
	}
}
