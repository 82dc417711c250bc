package keystore

import (
	"testing"
	"time"
)

func TestLifetimeWiden(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	tol := 5 * time.Minute
	for _, tc := range []struct {
		name string
		in   Lifetime
		want Lifetime
	}{
		{"always stays always", Always, Always},
		{"start only", Lifetime{Start: t0}, Lifetime{Start: t0.Add(-tol)}},
		{"end only", Lifetime{End: t1}, Lifetime{End: t1.Add(tol)}},
		{"both", Lifetime{Start: t0, End: t1}, Lifetime{Start: t0.Add(-tol), End: t1.Add(tol)}},
	} {
		if got := tc.in.Widen(tol); got != tc.want {
			t.Errorf("%s: Widen = %v, want %v", tc.name, got, tc.want)
		}
	}
}
