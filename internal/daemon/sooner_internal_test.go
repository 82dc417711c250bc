package daemon

import (
	"testing"
	"time"
)

// TestSooner: the earlier of two instants, the zero time for none.
func TestSooner(t *testing.T) {
	a := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	b := a.Add(time.Second)
	var none time.Time
	for _, tc := range []struct{ x, y, want time.Time }{
		{a, b, a}, {b, a, a}, {a, a, a}, {none, b, b}, {a, none, a}, {none, none, none},
	} {
		if got := sooner(tc.x, tc.y); !got.Equal(tc.want) {
			t.Errorf("sooner(%v, %v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}

// TestPace: a pass asked for by session events alone waits eight times the
// last full pass's cost, at most a second; a free pass paces nothing.
func TestPace(t *testing.T) {
	for _, tc := range []struct{ cost, want time.Duration }{
		{0, 0}, {-time.Millisecond, 0}, {time.Millisecond, 8 * time.Millisecond},
		{80 * time.Millisecond, 640 * time.Millisecond}, {125 * time.Millisecond, time.Second}, {250 * time.Millisecond, time.Second}, {time.Minute, time.Second},
	} {
		if got := pace(tc.cost); got != tc.want {
			t.Errorf("pace(%v) = %v, want %v", tc.cost, got, tc.want)
		}
	}
}
