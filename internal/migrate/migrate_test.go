package migrate

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

func TestCoveringPrefix(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		peer   string
		others []string
		want   string // "" none
	}{
		{"10.255.0.2", nil, "10.255.0.0/30"},              // a /30 link: .0/30, not .2/31 (its first address is the peer)
		{"10.0.0.1", nil, "10.0.0.0/31"},                  // a /31 link
		{"10.0.0.4", nil, "10.0.0.0/29"},                  // .4's /31 and /30 start at .4
		{"10.0.0.7", []string{"10.0.0.6"}, ""},            // every candidate holds .6
		{"10.0.0.2", []string{"10.0.0.5"}, "10.0.0.0/30"}, // .5 is outside .0/30
		{"10.0.0.2", []string{"10.0.0.1"}, ""},            // another neighbor in every candidate
		{"2001:db8::2", nil, "2001:db8::/126"},
	} {
		others := []netip.Addr{}
		for _, o := range tc.others {
			others = append(others, a(o))
		}
		got, ok := CoveringPrefix(a(tc.peer), others, 8)
		if (tc.want == "") == ok || (ok && got.String() != tc.want) {
			t.Errorf("CoveringPrefix(%s, %v) = %s %v, want %q", tc.peer, tc.others, got, ok, tc.want)
		}
	}
}

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
