package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateSendWithinAccept: the key source refuses a key whose send
// lifetime is not within its accept lifetime; a policy's key chain may
// override either lifetime, so Validate refuses the same of the effective
// lifetimes, naming the policy's line and field, the key and the fix. It
// used to pass them.
func TestValidateSendWithinAccept(t *testing.T) {
	tests := []struct {
		name    string
		key     string // the policy's key entry
		refused bool
	}{
		{"key's own lifetimes", `{name: k1}`, false},
		{"send narrowed", `{name: k1, send_lifetime: {start: "2026-11-02T00:00:00Z", end: "2026-11-20T00:00:00Z"}}`, false},
		{"accept given an end, send open-ended", `{name: k1, accept_lifetime: {start: "2026-10-31T00:00:00Z", end: "2026-12-01T00:00:00Z"}}`, true},
		{"both bounded, send ends after accept", `{name: k1, send_lifetime: {start: "2026-11-01T00:00:00Z", end: "2026-12-05T00:00:00Z"}, accept_lifetime: {start: "2026-10-31T00:00:00Z", end: "2026-12-01T00:00:00Z"}}`, true},
		{"accept narrowed past send's start", `{name: k1, accept_lifetime: {start: "2026-11-10T00:00:00Z"}}`, true},
		{"both, consistent", `{name: k1, send_lifetime: {start: "2026-11-10T00:00:00Z"}, accept_lifetime: {start: "2026-11-09T00:00:00Z"}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// k1 is sent from t0 and accepted from a day before, both open-ended.
			snap := snapshot(chain("core", mkt("core", "k1", 1, 2, from(0), from(-24*3600e9))))
			p := mustParse(t, "version: 1\nkey_chains:\n  - name: core\n    keys:\n      - "+tc.key+"\npeers:\n  - neighbor: 192.0.2.2\n    key_chain: core\n")
			var found []error
			for _, pr := range p.Validate(snap, t0, 24*3600e9) {
				if strings.Contains(pr.Error(), "send lifetime") {
					found = append(found, pr)
				}
			}
			if (len(found) > 0) != tc.refused {
				t.Fatalf("send-lifetime problems %v, want some: %v", found, tc.refused)
			}
			if !tc.refused {
				return
			}
			msg := found[0].Error()
			if !errors.Is(found[0], ErrInvalid) || !strings.HasPrefix(msg, "test.yaml:5:") || !strings.Contains(msg, `key "k1"`) ||
				!strings.Contains(msg, "key_chains[0].keys[0]") || !strings.Contains(msg, "within its accept lifetime") {
				t.Errorf("%q: want ErrInvalid at test.yaml:5, field key_chains[0].keys[0], key k1, and the fix", msg)
			}
		})
	}
}
