package main

import (
	"strings"
	"testing"
)

// TestPeerConfigInterfaceNeighbour: aoctl peer-config renders the far end
// of an interface neighbour named by its interface, from the chain its
// neighbor_interface binding names: BIRD's `neighbor ADDR % "IFACE"` with
// --far-interface, a second aokeyd with FRR's `neighbor IFACE interface`;
// a target that has no such form refuses the chain, and --far-interface
// for a neighbor by address is a usage error.
func TestPeerConfigInterfaceNeighbour(t *testing.T) {
	cfg := copyTestdata(t,
		[3]string{"policy.yaml", "  - neighbor: 192.0.2.3\n    key_chain: core\n", "  - {neighbor_interface: [swp1, swp2], key_chain: core}\n"},
		[3]string{"aokeyd.yaml", "policy:\n", "speaker:\n  type: frr\npolicy:\n"},
		[3]string{"keys.yaml", "peers: [192.0.2.0/24]", `peers: [192.0.2.0/24, "fe80::/64"]`})
	for _, tc := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"swp1", "--for", "bird", "--far-interface", "eth1", "--at", "2026-10-15"}, exitOK,
			[]string{"Inside `protocol bgp` for neighbor <aokeyd-router-link-local-address> % \"eth1\":", "send id 110; recv id 10;"}},
		{[]string{"swp2 interface", "--for", "aokeyd", "--at", "2026-10-15"}, exitOK,
			[]string{"#   - neighbor_interface: <far-end-interface>", "#  neighbor <far-end-interface> interface remote-as <asn>"}},
		{[]string{"swp1", "--for", "junos", "--at", "2026-10-15"}, exitInvalid,
			[]string{"refused: junos: an interface neighbour's far end is rendered for aokeyd"}},
		{[]string{"swp3", "--for", "bird", "--at", "2026-10-15"}, exitInvalid, []string{"interface neighbour on swp3"}},
		{[]string{"192.0.2.2", "--for", "bird", "--far-interface", "eth1"}, exitUsage, []string{"--far-interface: PEER 192.0.2.2 is no interface neighbour"}},
	} {
		r := runAoctl(t, "", append([]string{"peer-config", "--config", cfg}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("%q: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(r.stdout+r.stderr, s) {
				t.Errorf("%q does not say %q:\n%s%s", tc.args, s, r.stdout, r.stderr)
			}
		}
	}
}
