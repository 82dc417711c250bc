package daemon_test

import (
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestConnectKeysNeverStrand: the keys aokeyd puts on the speaker's own
// connects (aokeyd exec) follow the never-strand rule too. After the only
// key's lifetime ended with the session down, the next connect still
// carries it; with a peer that never sent with the preferred key,
// connects alternate between the key it last authenticated with and the
// preferred one; a key edited in place is not offered.
func TestConnectKeysNeverStrand(t *testing.T) {
	dst := netip.AddrPortFrom(peerAddr, bgpPort)
	offer := func(e *env) (ids []string, current uint8) {
		keys, cur, _, ok := e.d.ConnectKeys(speakerPID, dst)
		if !ok {
			t.Fatal("ConnectKeys: the managed peer is not answered for")
		}
		for _, k := range keys {
			ids = append(ids, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
			k.Secret.Zero()
		}
		return ids, cur
	}
	down := func(e *env) {
		info := e.sessionInfo()
		info.State = bgp.StateIdle
		e.sp.Set(info)
		e.waitFor("the session down in status", func() bool { return e.peerStatus().Rotation.State == "down" })
	}
	t.Run("only key past its lifetime, session down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			now := time.Now()
			k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
			e := newEnv(t, envOptions{keys: []testKey{k1}})
			e.waitKeys("listener", e.lis, ids(k1))
			e.up(ids(k1), k1)
			if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
				t.Fatal(err)
			}
			e.settle() // the machine reads the peer's segments
			down(e)
			time.Sleep(time.Until(k1.end) + time.Second)
			e.settle()
			if got, cur := offer(e); len(got) != 1 || got[0] != k1.ids() || cur != k1.send {
				t.Errorf("connect keys %v current %d, want k1 (%s), the key the peer last authenticated with", got, cur, k1.ids())
			}
		})
	})
	t.Run("lagging peer: alternate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			now := time.Now()
			k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour)}
			k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
			e := newEnv(t, envOptions{keys: []testKey{k1}, switchTimeout: time.Hour})
			e.waitKeys("listener", e.lis, ids(k1))
			e.up(ids(k1), k1)
			if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
				t.Fatal(err)
			}
			e.refreshWith(k1, k2) // the peer never gets k2
			e.waitFor("k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
			down(e)
			var curs []uint8
			for range 4 {
				_, cur := offer(e)
				curs = append(curs, cur)
			}
			if fmt.Sprint(curs) != fmt.Sprint([]uint8{k1.send, k2.send, k1.send, k2.send}) {
				t.Errorf("connects signed with %v, want k1 and k2 (%d, %d) alternating, k1 first", curs, k1.send, k2.send)
			}
		})
	})
	t.Run("edited in place: not offered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			now := time.Now()
			k0 := testKey{name: "k0", send: 10, recv: 11, secret: "daemon-test-secret-k0-Xq7", sendStart: now.Add(-3 * time.Hour)}
			k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour)}
			e := newEnv(t, envOptions{keys: []testKey{k0, k1}})
			e.waitKeys("listener", e.lis, ids(k0, k1))
			e.up(ids(k0, k1), k0, k1)
			edited := k1
			edited.secret = "daemon-test-secret-k1-edited-Qw3"
			e.refreshWith(k0, edited)
			e.settle()
			keys, cur, _, _ := e.d.ConnectKeys(speakerPID, dst)
			defer func() {
				for _, k := range keys {
					k.Secret.Zero()
				}
			}()
			if len(keys) != 1 || keys[0].SendID != k0.send || cur != k0.send {
				t.Errorf("connect keys %v current %d, want k0 alone: k1's edit is held back", keyRefs(keys), cur)
			}
		})
	})
}

func keyRefs(ks []tcpao.Key) []tcpao.KeyRef {
	var out []tcpao.KeyRef
	for _, k := range ks {
		out = append(out, k.KeyRef)
	}
	return out
}
