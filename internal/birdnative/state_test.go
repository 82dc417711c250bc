package birdnative

import (
	"context"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// The session state in status (and so in the fleet document) is the one
// vocabulary every speaker's status uses (bgp.SessionState's names), not
// BIRD's own capitalisation: aoctl fleet status compared "Established"
// from a native BIRD router with "established" and flagged the link (the
// chaos run found it).
func TestStatusSessionStateVocabulary(t *testing.T) {
	d, _, _ := newTestDriver(t, "k1")
	for _, tc := range []struct{ bird, want string }{
		{"Established", "established"}, {"Active", "active"}, {"Connect", "connect"}, {"Idle", "idle"},
		{"OpenSent", "opensent"}, {"OpenConfirm", "openconfirm"}, {"Down", "unknown"}, {"", "unknown"},
	} {
		d.mu.Lock()
		d.views = []peerView{{ID: peer.KeyOf(netip.MustParseAddr("192.0.2.2"), ""), Protocol: &bird.Protocol{Name: "peer_a", BGPState: tc.bird}}}
		d.mu.Unlock()
		rep, err := d.Status(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Peers[0].SessionState; got != tc.want {
			t.Errorf("BIRD's %q: session_state %q, want %q", tc.bird, got, tc.want)
		}
	}
}
