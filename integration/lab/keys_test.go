package lab

import (
	"reflect"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

func TestKeyLifetime(t *testing.T) {
	start := time.Date(2026, 12, 1, 5, 0, 0, 0, time.FixedZone("x", 3600))
	end := start.Add(90 * time.Minute)
	for _, tc := range []struct {
		name       string
		start, end time.Time
		want       any
	}{
		{"open", time.Time{}, time.Time{}, "always"},
		{"start only", start, time.Time{}, map[string]string{"start": "2026-12-01T04:00:00Z"}},
		{"end only", time.Time{}, end, map[string]string{"end": "2026-12-01T05:30:00Z"}},
		{"both", start, end, map[string]string{"start": "2026-12-01T04:00:00Z", "end": "2026-12-01T05:30:00Z"}},
	} {
		if got := KeyLifetime(tc.start, tc.end); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: KeyLifetime = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKeyList(t *testing.T) {
	got := KeyList([]control.Key{{SendID: 1, RecvID: 101, Current: true, PktGood: 12}, {SendID: 2, RecvID: 102, RNext: true}})
	if want := "[1/101C(good=12) 2/102R(good=0)]"; got != want {
		t.Errorf("KeyList = %q, want %q", got, want)
	}
	if got := KeyList(nil); got != "[]" {
		t.Errorf("KeyList(nil) = %q, want []", got)
	}
}
