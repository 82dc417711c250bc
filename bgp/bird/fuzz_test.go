package bird

import (
	"strings"
	"testing"
)

// FuzzParseProtocols: BIRD's `show protocols all` output is outside input:
// any text parses without a panic, every protocol has a name, and a key
// ID the output does not show stays -1.
func FuzzParseProtocols(f *testing.F) {
	f.Add("Name Proto Table State Since Info\npeer_a BGP --- up 2026-12-04 05:00:01.123 Established\n  BGP state: Established\n    Neighbor address: 10.255.0.1\n      Current key: 101\n      RNext key: 1\n")
	f.Add("peer_1 BGP --- start 05:00:02 Active\n    Neighbor address: 2001:db8::1%eth0\n")
	f.Add("  orphan detail: 1\n\tpeer\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range ParseProtocols(out) {
			if p.Name == "" || strings.ContainsAny(p.Name, " \t\n") {
				t.Fatalf("protocol name %q", p.Name)
			}
			if !strings.Contains(out, "Current key") && p.CurrentKey != -1 {
				t.Fatalf("current key %d from no Current key line", p.CurrentKey)
			}
		}
	})
}
