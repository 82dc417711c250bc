package rotator

import (
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

func observe(t testing.TB, s tcpao.Socket) Observed {
	t.Helper()
	o, err := Observe(s)
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
	for _, h := range sp.Deferred {
		out = append(out, "defer "+heldRef(h)+" ("+h.Why.String()+")")
	}
	for _, h := range sp.Blocked {
		out = append(out, "blocked "+heldRef(h)+" ("+h.Why.String()+")")
	}
	return out
}

// waitUntil, in a synctest bubble, lets the controller's machines run until
// cond holds; it fails the test if cond does not hold within limit of the
// bubble's clock. cond is checked after synctest.Wait, when every machine
// has done all it can without time passing; while it does not hold only
// time can change that, so the clock moves on by a millisecond (or to the
// next timer that fires sooner).
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for waited := time.Duration(0); ; waited += time.Millisecond {
		synctest.Wait()
		if cond() {
			return
		}
		if waited >= limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
}
