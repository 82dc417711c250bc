package bird

import "testing"

func TestSameSince(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"2026-12-01 22:51:42", "2026-12-01 22:51:42", true},
		{"2026-12-01 22:51:42", "2026-12-01 22:51:41", true}, // one reading a second off
		{"2026-12-01 22:51:41", "2026-12-01 22:51:43", false},
		{"2026-12-01 22:51:42", "2026-12-01 22:55:10", false}, // up again later: a flap
		{"2026-12-01 22:51:42", "", false},
	} {
		if got := SameSince(tc.a, tc.b); got != tc.same {
			t.Errorf("SameSince(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
