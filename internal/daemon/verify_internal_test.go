package daemon

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// listenerFor attributes a listener key's failures to a peer only when no
// other peer falls in the key's prefix; the socket counters are reported
// for every peer; keys of another VRF or another address are left out.
func TestListenerForAttribution(t *testing.T) {
	pfx := netip.MustParsePrefix
	ki := func(p string, ifindex int, bad uint64, exclude bool) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: tcpao.KeyRef{Peer: pfx(p), IfIndex: ifindex, SendID: 1, RecvID: 2}, PktBad: bad, ExcludeOptions: exclude}
	}
	ls := []listenerObs{{name: "listen 0.0.0.0:179", obs: rotator.Observed{HaveAO: true,
		Info: tcpao.Info{PktBad: 9, PktKeyNotFound: 4, PktAORequired: 2, PktDroppedICMP: 1},
		Keys: []tcpao.KeyInfo{
			ki("192.0.2.2/32", 0, 3, true),   // the peer's own
			ki("192.0.2.0/24", 0, 5, false),  // shared with 192.0.2.3 when that one is a peer
			ki("192.0.2.2/32", 7, 11, false), // another VRF
			ki("198.51.100.0/24", 0, 13, false),
		}}}}
	a := netip.MustParseAddr("192.0.2.2")
	cases := []struct {
		name    string
		others  []netip.Addr
		keys    int
		bad     uint64
		shared  int
		options string
	}{
		{name: "alone in the /24", others: []netip.Addr{a}, keys: 2, bad: 8, options: "exclude"},
		{name: "another peer in the /24", others: []netip.Addr{a, netip.MustParseAddr("192.0.2.3")}, keys: 2, bad: 3, shared: 1, options: "exclude"},
		{name: "v4-mapped peer address", others: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.2")}, keys: 2, bad: 8, options: "exclude"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lc, bad := listenerFor(ls, a, 0, c.others)
			shared := 0
			for _, k := range lc.Keys {
				if k.Shared {
					shared++
				}
			}
			if len(lc.Keys) != c.keys || bad != c.bad || shared != c.shared || lc.Keys[0].TCPOptions != c.options {
				t.Fatalf("keys %+v bad %d, want %d keys, bad %d, %d shared, first %s", lc.Keys, bad, c.keys, c.bad, c.shared, c.options)
			}
			if lc.PktBad != 9 || lc.PktKeyNotFound != 4 || lc.PktAORequired != 2 || lc.PktDroppedICMP != 1 {
				t.Fatalf("socket counters %+v, want the listener's", lc)
			}
		})
	}
}

// TestVerifyBaseShrinks: the bases every peer takes while down at the
// start are not kept at that size once the sessions are up (verifyBase):
// a delete that leaves under a quarter of the peak makes the map afresh,
// the last one drops it; the bases left are kept as they were.
func TestVerifyBaseShrinks(t *testing.T) {
	const n = 4096
	id := func(i int) rotator.PeerID {
		return rotator.PeerID{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})}
	}
	var v verifyBase
	for i := range n {
		v.noteDown(id(i), verifyCounts{bad: uint64(i)})
	}
	for i := range n - n/8 { // most sessions up
		v.failing(id(i), true, verifyCounts{}, false)
	}
	if len(v.base) != n/8 || v.peak >= n/4 {
		t.Fatalf("%d bases left, peak %d: want %d, made afresh under %d", len(v.base), v.peak, n/8, n/4)
	}
	if got := v.failing(id(n-1), false, verifyCounts{bad: n}, false); got != verifyBadMAC {
		t.Errorf("a base kept through the shrink: %v, want a bad MAC", got)
	}
	for i := n - n/8; i < n; i++ {
		v.forget(id(i))
	}
	if v.base != nil || v.peak != 0 {
		t.Errorf("with no base left: %d bases, peak %d", len(v.base), v.peak)
	}
}
