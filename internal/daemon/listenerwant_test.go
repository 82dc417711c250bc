package daemon

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestListenerWantByDevice: a listener bound to a VRF's device gets only
// that VRF's keys (and only its revocations and approved replacements);
// an unbound one gets every key of its family; a dual-stack listener
// takes the IPv4 peers too when the speaker has no IPv4 listener.
func TestListenerWantByDevice(t *testing.T) {
	key := func(peer string, dev int, id uint8) rotator.DesiredKey {
		return rotator.DesiredKey{Key: tcpao.Key{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix(peer), IfIndex: dev, SendID: id, RecvID: id}}}
	}
	v4 := rotator.Desired{Kind: rotator.Listening,
		Keys:    []rotator.DesiredKey{key("10.0.0.2/32", 0, 1), key("10.255.0.2/32", 5, 2), key("10.255.0.2/32", 7, 3)},
		Revoked: []rotator.RevokedKey{{KeyRef: key("10.255.0.2/32", 5, 9).KeyRef}, {KeyRef: key("10.255.0.2/32", 7, 9).KeyRef}},
		Replace: []tcpao.KeyRef{key("10.255.0.2/32", 7, 3).KeyRef},
	}
	v6 := rotator.Desired{Kind: rotator.Listening, Keys: []rotator.DesiredKey{key("2001:db8::2/128", 7, 4)}}
	ref := func(addr string, dev int) sockets.Ref {
		return sockets.Ref{Local: netip.MustParseAddrPort(addr), Listening: true, BoundDev: dev}
	}
	ids := func(d rotator.Desired) (keys, revoked, replace []uint8) {
		for _, k := range d.Keys {
			keys = append(keys, k.SendID)
		}
		for _, r := range d.Revoked {
			revoked = append(revoked, uint8(r.IfIndex))
		}
		for _, r := range d.Replace {
			replace = append(replace, r.SendID)
		}
		return
	}
	for _, tc := range []struct {
		name                    string
		ref                     sockets.Ref
		have4                   bool
		socket                  rotator.SocketID
		keys, revoked, replaced []uint8
	}{
		{"unbound v4", ref("0.0.0.0:179", 0), true, "listen 0.0.0.0:179", []uint8{1, 2, 3}, []uint8{5, 7}, []uint8{3}},
		{"vrf red's v4", ref("0.0.0.0:179", 5), true, "listen 0.0.0.0:179 dev 5", []uint8{2}, []uint8{5}, nil},
		{"vrf blue's v4", ref("0.0.0.0:179", 7), true, "listen 0.0.0.0:179 dev 7", []uint8{3}, []uint8{7}, []uint8{3}},
		{"unbound v6 beside v4", ref("[::]:179", 0), true, "listen [::]:179", []uint8{4}, nil, nil},
		{"dual-stack, vrf blue", ref("[::]:179", 7), false, "listen [::]:179 dev 7", []uint8{4, 3}, []uint8{7}, []uint8{3}},
		{"unknown device", ref("0.0.0.0:179", 9), true, "listen 0.0.0.0:179 dev 9", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := listenerWantOf(tc.ref, v4, v6, tc.have4)
			keys, revoked, replace := ids(got)
			if got.Socket != tc.socket || !slices.Equal(keys, tc.keys) || !slices.Equal(revoked, tc.revoked) || !slices.Equal(replace, tc.replaced) {
				t.Fatalf("want of %s: socket %q keys %v revoked(ifindex) %v replace %v; want %q %v %v %v",
					tc.ref, got.Socket, keys, revoked, replace, tc.socket, tc.keys, tc.revoked, tc.replaced)
			}
		})
	}
	if len(v4.Keys) != 3 || len(v6.Keys) != 1 {
		t.Fatalf("the inputs were modified: v4 %d keys, v6 %d", len(v4.Keys), len(v6.Keys))
	}
}
