package conformance

import (
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// probeBound is how long a kernel may take to send an armed keepalive
// probe and take in the peer's answer: one second of idle, then a round
// trip on loopback, with room for a loaded emulated machine.
const probeBound = 30 * time.Second

func probeCases() []Case {
	return []Case{
		// A key roll waits for the peer's next segment twice (the peer
		// sending with the announced key, then again after the grace
		// period). One keepalive probe brings it: the probe carries the
		// RNextKeyID, the peer's kernel switches its Current_key to the
		// key it names and answers the probe with it (tcpao.PeerProber).
		{"ao/keepalive-probe-brings-the-peers-switch", func(t *testing.T, e env) {
			pr, _, _ := rotationPair(e)
			e.exchange(pr.c, pr.a, 1)
			e.wantErr("rnext two", pr.c.SetInfo(tcpao.InfoChange{RNext: u8(12)}), nil)
			if in := e.info(pr.a); in.CurrentKey != 11 {
				t.Fatalf("accepted Info = %+v before the probe, want Current_key 11 (no segment carried the ask yet)", in)
			}
			if g, _ := e.keyCounters(pr.c, 2, 12); g != 0 {
				t.Fatalf("client's key two pkt_good = %d before the probe, want 0", g)
			}
			p, err := tcpao.ArmPeerProbe(pr.c)
			e.wantErr("arm", err, nil)
			if !p.Armed {
				t.Fatalf("ArmPeerProbe = %+v on a socket without SO_KEEPALIVE, want armed", p)
			}
			e.eventually("the peer's answer signed with key two", probeBound, func() bool {
				g, _ := e.keyCounters(pr.c, 2, 12)
				return g > 0
			})
			if in := e.info(pr.a); in.CurrentKey != 12 || in.PktBad != 0 {
				t.Fatalf("accepted Info = %+v after the probe, want Current_key 12 and no bad segment", in)
			}
			e.wantErr("end", tcpao.EndPeerProbe(pr.c, p), nil)
			e.exchange(pr.c, pr.a, 1)
			if in := e.info(pr.c); in.PktBad != 0 || in.PktKeyNotFound != 0 {
				t.Fatalf("client Info = %+v after the probe's end", in)
			}
		}},
	}
}
