package daemon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestRollCostsAtMostFourSpeakerQueries: a full scheduled roll of one peer
// (install, announce, switch, grace, retire), run by the daemon through its
// real session guard, asks the speaker at most 4 questions (each one RPC to
// gobgpd).
func TestRollCostsAtMostFourSpeakerQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, k3 := testKeys()
		k3.sendStart = time.Now().Add(8 * time.Second)
		e := newEnv(t, envOptions{keys: []testKey{k1}, refresh: 5 * time.Second})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up(ids(k1), k1)
		e.quiet(0)

		before := e.sp.Queries()
		// The remote router holds k3 too (k1 stays its current key).
		m := k3.mirror()
		if err := e.client.AddKey(m, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		m.Secret.Zero()
		e.setSourceKeys(k1, k3)
		e.d.Kick()
		e.waitKeys("k3 installed", e.acc, ids(k1, k3))
		// k3 comes due: the daemon announces it; the remote router then
		// asks for it too, and the session switches to it.
		e.waitFor("k3 announced", func() bool { return info(t, e.acc).RNextKey == k3.recv })
		r := k3.send
		if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the session to send with k3", func() bool {
			if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
				t.Fatalf("exchange during the roll: %v", err)
			}
			return info(t, e.acc).CurrentKey == k3.send
		})
		// k1 leaves the key source: after the grace period it is retired.
		e.setSourceKeys(k3)
		e.d.Kick()
		e.waitKeys("k1 retired", e.acc, ids(k3))
		e.quiet(time.Second)
		got := e.sp.Queries() - before
		t.Logf("speaker queries for one roll of one peer: %d", got)
		if got > 4 {
			t.Errorf("one roll of one peer asked the speaker %d times, want <= 4", got)
		}
		if st := e.peerStatus().Rotation.State; st != "steady" {
			t.Errorf("rotation state %q after the roll, want steady", st)
		}
		if i := info(t, e.acc); i.PktBad != 0 {
			t.Errorf("pkt_bad %d after the roll", i.PktBad)
		}
	})
}
