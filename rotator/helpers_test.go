package rotator

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

func secret(s string) tcpao.Secret {
	b := make([]byte, 16)
	copy(b, s)
	return tcpao.NewSecret(b)
}

func mkKey(peer string, send, recv uint8, sec string) tcpao.Key {
	p := netip.MustParsePrefix(peer)
	return tcpao.Key{KeyRef: tcpao.KeyRef{Peer: p, SendID: send, RecvID: recv}, Algorithm: tcpao.HMACSHA256, Secret: secret(sec)}
}

func dk(k tcpao.Key) DesiredKey { return DesiredKey{Key: k} }

// revokedOf lists keys as Desired.Revoked names them: reference and
// material.
func revokedOf(keys ...tcpao.Key) []RevokedKey {
	out := make([]RevokedKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, RevokedKey{KeyRef: k.KeyRef, Fingerprint: k.Secret.Fingerprint()})
	}
	return out
}

func observe(t testing.TB, s tcpao.Socket) Observed {
	t.Helper()
	o, err := Observe(s, ReadFull)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	return o
}

func renderString(t testing.TB, p Plan) string {
	t.Helper()
	var b strings.Builder
	if err := Render(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func opLines(sp SocketPlan) []string {
	var out []string
	for _, o := range sp.Ops {
		out = append(out, o.Line())
	}
	for _, e := range sp.Edits {
		out = append(out, "edit "+refText(e.Ref)+" ("+e.Rule.String()+")")
	}
	for _, h := range sp.Deferred {
		out = append(out, "defer "+heldRef(h)+" ("+h.Why.String()+")")
	}
	for _, h := range sp.Blocked {
		out = append(out, "blocked "+heldRef(h)+" ("+h.Why.String()+")")
	}
	for _, h := range sp.Kept {
		out = append(out, "kept "+heldRef(h)+" ("+h.Why.String()+")")
	}
	return out
}

// waitUntil, in a synctest bubble, lets the controller's machines run
// until cond holds (testkit.Until); it fails the test if cond does not hold
// within limit of the bubble's clock.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !testkit.Until(limit, cond) {
		t.Fatalf("%s: not within %v", what, limit)
	}
}

// pid is the test peer named name: each name is its own peer (its VRF
// field carries the name; the address is one for all).
func pid(name string) PeerID { return peer.Key{Addr: netip.MustParseAddr("192.0.2.1"), VRF: name} }

// setDesired is takeDesired with a value of the test's own.
func (m *machine) setDesired(d Desired, now time.Time) { m.takeDesired(&d, now) }
