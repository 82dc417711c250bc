//go:build linux

package rotatorkernel

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The keys, peers and desired states of rotator's own tests, written with
// its exported API.

func secret(s string) tcpao.Secret {
	b := make([]byte, 16)
	copy(b, s)
	return tcpao.NewSecret(b)
}

func mkKey(peer string, send, recv uint8, sec string) tcpao.Key {
	p := netip.MustParsePrefix(peer)
	return tcpao.Key{KeyRef: tcpao.KeyRef{Peer: p, SendID: send, RecvID: recv}, Algorithm: tcpao.HMACSHA256, Secret: secret(sec)}
}

func dk(k tcpao.Key) rotator.DesiredKey { return rotator.DesiredKey{Key: k} }

func want(k tcpao.Key) rotator.Desired {
	return rotator.Desired{Keys: []rotator.DesiredKey{dk(k)}, WantCurrent: rotator.ID(k.SendID), WantRNext: rotator.ID(k.RecvID)}
}

// pid is the test peer named name: each name is its own peer (its VRF
// field carries the name; the address is one for all).
func pid(name string) rotator.PeerID {
	return peer.Key{Addr: netip.MustParseAddr("192.0.2.1"), VRF: name}
}

func observe(t testing.TB, s tcpao.Socket) rotator.Observed {
	t.Helper()
	o, err := rotator.Observe(s, rotator.ReadFull)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	return o
}

// planText is one socket's plan as rotator.Render writes it, for a
// failure's message.
func planText(sp rotator.SocketPlan) string {
	var b strings.Builder
	if err := rotator.Render(&b, rotator.Plan{sp}); err != nil {
		return err.Error()
	}
	return b.String()
}
