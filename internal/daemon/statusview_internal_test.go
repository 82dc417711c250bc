package daemon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// The keys in use come from the kernel's Current_key and RNext_key marks on
// the session's keys; while a roll waits for the peer to take the key it
// announced, the peer still sends with the RNext_key before.
func TestKeysInUse(t *testing.T) {
	k1 := control.Key{Chain: "core", Name: "k1", SendID: 1, RecvID: 101}
	k2 := control.Key{Chain: "core", Name: "k2", SendID: 2, RecvID: 102}
	anon := control.Key{SendID: 7, RecvID: 107}
	mark := func(k control.Key, cur, rnext bool) control.Key { k.Current, k.RNext = cur, rnext; return k }
	name := func(k *control.KeyName) string {
		if k == nil {
			return "-"
		}
		return k.String()
	}
	for _, tc := range []struct {
		name                 string
		keys                 []control.Key
		rs                   rotator.Status
		sending, peer, asked string
	}{
		{"steady", []control.Key{mark(k1, true, true), k2}, rotator.Status{State: rotator.StateSteady}, "core/k1", "core/k1", "-"},
		{"switched, in grace", []control.Key{k1, mark(k2, true, true)}, rotator.Status{State: rotator.StateGrace}, "core/k2", "core/k2", "-"},
		{"announced: the peer still sends with the key before", []control.Key{mark(k1, true, false), mark(k2, false, true)},
			rotator.Status{State: rotator.StateAnnounced, AnnouncedFrom: rotator.ID(101)}, "core/k1", "core/k1", "core/k2"},
		{"announced from nothing known", []control.Key{mark(k1, true, false), mark(k2, false, true)},
			rotator.Status{State: rotator.StateAnnounced}, "core/k1", "core/k2", "-"},
		{"a key the source does not name", []control.Key{mark(anon, true, true)}, rotator.Status{}, "send=7 recv=107", "send=7 recv=107", "-"},
		{"no Current_key", []control.Key{k1, k2}, rotator.Status{}, "-", "-", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := control.PeerStatus{Keys: tc.keys}
			keysInUse(&ps, tc.rs)
			if got := [3]string{name(ps.Sending), name(ps.PeerSending), name(ps.PeerAsked)}; got != [3]string{tc.sending, tc.peer, tc.asked} {
				t.Errorf("sending, peer sending, asked = %q; want %q", got, [3]string{tc.sending, tc.peer, tc.asked})
			}
		})
	}
}

// What the speaker says of the neighbor goes to status as it said it.
func TestSpeakerView(t *testing.T) {
	down := time.Date(2026, 11, 1, 10, 29, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		info bgp.PeerInfo
		want control.PeerStatus
	}{
		{"frr", bgp.PeerInfo{PeerASN: 65002, Flops: 3, About: &bgp.PeerAbout{Description: "core-2", LastDown: down, LastDownReason: "Hold timer expired"}},
			control.PeerStatus{PeerAS: 65002, Flaps: 3, Description: "core-2", LastDown: down, LastDownReason: "Hold timer expired"}},
		{"gobgp: when, not why", bgp.PeerInfo{PeerASN: 65003, About: &bgp.PeerAbout{LastDown: down}},
			control.PeerStatus{PeerAS: 65003, LastDown: down}},
		{"nothing reported", bgp.PeerInfo{}, control.PeerStatus{}},
		{"by address", bgp.PeerInfo{Neighbor: netip.MustParseAddr("192.0.2.2")}, control.PeerStatus{Peer: "192.0.2.2"}},
		{"interface neighbour", bgp.PeerInfo{Link: peer.LinkOf("swp1"), Neighbor: netip.MustParseAddr("fe80::b")},
			control.PeerStatus{Peer: "fe80::b", Interface: "swp1"}},
		{"interface neighbour, no address learned", bgp.PeerInfo{Link: peer.LinkOf("swp1")}, control.PeerStatus{Interface: "swp1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps control.PeerStatus
			speakerView(&ps, tc.info)
			if ps.Peer != tc.want.Peer || ps.Interface != tc.want.Interface || ps.PeerAS != tc.want.PeerAS || ps.Flaps != tc.want.Flaps || ps.Description != tc.want.Description ||
				!ps.LastDown.Equal(tc.want.LastDown) || ps.LastDownReason != tc.want.LastDownReason {
				t.Errorf("got %+v, want %+v", ps, tc.want)
			}
		})
	}
}
