package main

import (
	"strings"
	"testing"
)

// TestValidateInterfaceBinding: aoctl validate takes a policy that binds
// FRR's interface neighbours (issue 53) by the form the guest scenario
// writes (neighbor_interface: "*"), by one name and by a list, when the
// speaker is FRR; with a speaker that reports no interface neighbours it
// refuses the binding on its line, naming the fix; and a chain whose keys
// are restricted to peers that are not link-local leaves the binding
// without a key (its neighbours' addresses are fe80::/10).
func TestValidateInterfaceBinding(t *testing.T) {
	const binding = "  - neighbor: 192.0.2.3\n    key_chain: core\n"
	for _, tc := range []struct {
		name, speaker, peers string
		code                 int
		says                 []string
	}{
		{"every interface, frr", "speaker:\n  type: frr\n", "  - {neighbor_interface: \"*\", key_chain: core}\n", exitOK, []string{": ok ("}},
		{"one interface, frr", "speaker:\n  type: frr\n", "  - {neighbor_interface: swp1, vrf: red, key_chain: core}\n", exitOK, []string{": ok ("}},
		{"a list, frr", "speaker:\n  type: frr\n", "  - {neighbor_interface: [swp1, swp2], key_chain: core}\n", exitOK, []string{": ok ("}},
		{"gobgp", "speaker:\n  type: gobgp\n", "  - {neighbor_interface: \"*\", key_chain: core}\n", exitInvalid,
			[]string{"policy.yaml:14:", "peers[1].neighbor_interface", "reports no interface neighbours", "bind their addresses with neighbor"}},
		{"a bad name", "speaker:\n  type: frr\n", "  - {neighbor_interface: [swp1, \"sw/p\"], key_chain: core}\n", exitInvalid,
			[]string{"policy.yaml:14:", "peers[1].neighbor_interface[1]", "not a valid interface name"}},
		{"a chain for other peers", "speaker:\n  type: frr\n", "  - {neighbor_interface: \"*\", key_chain: core}\n", exitInvalid,
			[]string{"policy.yaml:14:", "peers[1].key_chain", "gap in send-key coverage: peer every interface (chain core)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edits := [][3]string{{"policy.yaml", binding, tc.peers}, {"aokeyd.yaml", "policy:\n", tc.speaker + "policy:\n"}}
			if tc.name != "a chain for other peers" {
				// The chain's keys apply to the link-local addresses
				// interface neighbours learn.
				edits = append(edits, [3]string{"keys.yaml", "peers: [192.0.2.0/24]", `peers: [192.0.2.0/24, "fe80::/64"]`})
			}
			cfg := copyTestdata(t, edits...)
			r := runAoctl(t, "", "validate", cfg, "--at", "2026-10-15", "--no-kernel")
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("the output does not say %q:\n%s%s", s, r.stdout, r.stderr)
				}
			}
		})
	}
}
