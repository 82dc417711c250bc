package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestPastedSecretNotShown: a secret pasted into a field of the policy
// (base64 key material, a Vault token) is refused by its place and field
// and never shown, while an ordinary wrong value still is (an operator
// sees which word is wrong). Issue 49 item 8: the policy's problems quoted
// every value they refused.
func TestPastedSecretNotShown(t *testing.T) {
	const secret = "hvs.CAESIJq3Ls9QpXv2WzRt8YbNc4Kd"
	const b64 = "c2VjcmV0LXBhc3RlZC1oZXJlLTIwMjY="
	const pol = "version: 1\nkey_chains:\n  - name: core\n    keys: [{name: k1}]\npeers:\n  - neighbor: 192.0.2.1\n    key_chain: core\n"
	tests := []struct {
		name, old, new, shown string
		reason                error
	}{
		{"neighbor", "neighbor: 192.0.2.1", "neighbor: VALUE", "192.0.2.300", ErrInvalid},
		{"key_chain", "key_chain: core", "key_chain: VALUE", "cor", ErrUnknownChain},
		{"vrf", "key_chain: core", "key_chain: core\n    vrf: VALUE", "a/b", ErrInvalid},
		{"algorithm", "keys: [{name: k1}]", "keys: [{name: k1}]\n    rotation: {interval: 30d, algorithm: VALUE}", "hmac(md5)", ErrAlgorithm},
		{"duration", "keys: [{name: k1}]", "keys: [{name: k1}]\n    rotation: {interval: VALUE}", "30x", ErrSyntax},
		{"on_key_expiry", "peers:", "safety:\n  on_key_expiry: VALUE\npeers:", "purge", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{secret, b64, tc.shown} {
				doc := strings.Replace(pol, tc.old, strings.ReplaceAll(tc.new, "VALUE", v), 1)
				_, err := Parse("p.yaml", []byte(doc))
				if err == nil || !errors.Is(err, tc.reason) {
					t.Fatalf("%s: error %v, want %v", v, err, tc.reason)
				}
				var pr *Problem
				if !errors.As(err, &pr) || pr.Line == 0 {
					t.Fatalf("%s: %v has no position", v, err)
				}
				if shown := strings.Contains(err.Error(), v); shown != (v == tc.shown) {
					t.Errorf("%s: shown %v in %q", v, shown, err)
				}
			}
		})
	}
}
