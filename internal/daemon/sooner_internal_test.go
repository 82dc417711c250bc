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
