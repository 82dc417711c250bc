package migrate

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

func TestAdvance(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	r := Record{Peer: peer.KeyOf(netip.MustParseAddr("10.255.0.2"), ""), At: t0.Add(time.Minute), Bound: time.Minute, Step: Prepared, Since: t0}
	for _, tc := range []struct {
		name string
		in   Record
		o    Observed
		now  time.Time
		want Step
	}{
		{"prepared before the switch time", r, Observed{}, t0, Prepared},
		{"prepared at the switch time", r, Observed{}, t0.Add(time.Minute), Switching},
		{"far end early: done at once", r, Observed{AOSession: true}, t0, Done},
		{"switching, far end switched", with(r, Switching), Observed{AOSession: true}, t0.Add(90 * time.Second), Done},
		{"switching, bound passed", with(r, Switching), Observed{}, t0.Add(2 * time.Minute), RolledBack},
		{"prepared long past the deadline rolls back", r, Observed{}, t0.Add(time.Hour), RolledBack},
		{"done stays done", with(r, Done), Observed{}, t0.Add(time.Hour), Done},
		{"rolled back stays rolled back", with(r, RolledBack), Observed{AOSession: true}, t0.Add(time.Hour), RolledBack},
		{"the tcp-ao key revoked: rolled back", with(r, Switching), Observed{NoAOKey: true, AOSession: true}, t0.Add(90 * time.Second), RolledBack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Advance(tc.in, tc.o, tc.now)
			if got.Step != tc.want {
				t.Fatalf("step %s, want %s", got.Step, tc.want)
			}
			if got.Step == RolledBack && tc.in.Step != RolledBack && !strings.Contains(got.Reason, "10.255.0.2") {
				t.Fatalf("reason %q", got.Reason)
			}
		})
	}
	if n := Next(r); !n.Equal(r.At) {
		t.Fatalf("Next(prepared) = %v", n)
	}
	if n := Next(with(r, Switching)); !n.Equal(r.Deadline()) {
		t.Fatalf("Next(switching) = %v", n)
	}
}

func with(r Record, s Step) Record { r.Step = s; return r }
