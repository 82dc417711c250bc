package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestInterfaceNeighbourSessionManaged (issue 53): an interface
// neighbour's session, accepted through the listener key of the address
// it learned, is managed as any peer's: status shows it steady under its
// interface, a new key of its chain reaches the session and the roll
// moves it there, and a revoke of the current key with a backup replaces
// it on the session at once and takes it off the listener's entry for
// the learned address. Before, the session was left with the keys it was
// accepted with (status: "not managed").
func TestInterfaceNeighbourSessionManaged(t *testing.T) {
	synctest.Test(t, testInterfaceNeighbourSessionManaged)
}

func testInterfaceNeighbourSessionManaged(t *testing.T) {
	now := time.Now()
	k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-2 * time.Hour)}
	k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Hour)}
	e := newEnv(t, envOptions{policy: linkPolicy, keys: []testKey{k1}})
	e.waitKeys("listener", e.lis, ids(k1))
	lis6 := e.listen6()

	llA, llB := netip.MustParseAddr("fe80::a"), netip.MustParseAddr("fe80::b")
	swp1 := bgp.PeerInfo{Link: peer.LinkOf("swp1"), Neighbor: llB, State: bgp.StateActive, Passive: true}
	e.sp.Set(swp1)
	e.waitFor("the listener keyed for swp1's learned fe80::b", func() bool {
		return slices.Equal(linkKeys(t, lis6), []string{"fe80::b/128 20/21"})
	})

	// The neighbour connects from fe80::b with k1; the speaker reports the
	// session.
	client, err := e.net.Socket(llB)
	if err != nil {
		t.Fatal(err)
	}
	addMirror(t, client, k1, llA)
	acc, err := e.net.ConnectTo(client, lis6, netip.MustParseAddr("fe80::a%swp1"))
	if err != nil {
		t.Fatalf("swp1's neighbour connecting signed: %v", err)
	}
	e.disc.add(acc, netip.AddrPortFrom(llA, bgpPort), client.LocalAddr(), false)
	up := swp1
	up.State, up.Local, up.LocalPort, up.RemotePort = bgp.StateEstablished, llA, bgpPort, client.LocalAddr().Port()
	up.Uptime = now.Add(-time.Minute).Truncate(time.Second)
	e.sp.Set(up)
	status := func() control.PeerStatus {
		rep, err := e.d.Status(context.Background(), "swp1")
		if err != nil {
			return control.PeerStatus{}
		}
		return rep.Peers[0]
	}
	e.waitFor("swp1's session managed and steady", func() bool { return status().Rotation.State == "steady" })
	if ps := status(); ps.Interface != "swp1" || ps.Peer != "fe80::b" {
		t.Errorf("status names the peer %q on %q, want fe80::b on swp1", ps.Peer, ps.Interface)
	}

	// k2 comes, sendable after k1: the session gets it and rolls to it.
	addMirror(t, client, k2, llA)
	e.refreshWith(k1, k2)
	e.waitFor("k2 on swp1's session", func() bool { return slices.Equal(keyIDs(t, acc), ids(k1, k2)) })
	r := k2.send
	if err := client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("swp1's session rolled to k2", func() bool {
		if err := e.net.Exchange(acc, client, 1); err != nil {
			t.Fatalf("exchange during the roll: %v", err)
		}
		i, c := info(t, acc), info(t, client)
		return i.CurrentKey == k2.send && i.RNextKey == k2.recv && c.CurrentKey == k2.recv && status().Rotation.State == "steady"
	})

	// A revoke of k2, k1 the backup: the session is forced onto k1 at once,
	// and the listener's entry for fe80::b loses k2 in the same revoke.
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k2.name})
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	var forced, listenerDel bool
	for _, s := range res.Sockets {
		switch {
		case s.Socket == "peer "+peer.OnLink("swp1", "").String():
			forced = s.Action == control.ActionForcedReplaced && s.Replacement == fmt.Sprintf("send=%d recv=%d", k1.send, k1.recv) && s.Error == ""
		case strings.HasPrefix(s.Socket, "listen ") && s.Peer == "fe80::b/128":
			listenerDel = s.Action == control.ActionDeleted && s.Error == ""
		}
	}
	if !forced || !listenerDel {
		t.Errorf("revoke outcomes %+v, want swp1's session forced onto k1 and the listener's fe80::b entry deleted", res.Sockets)
	}
	if got := keyIDs(t, acc); !slices.Equal(got, ids(k1)) {
		t.Errorf("swp1's session keys %v after the revoke, want %v", got, ids(k1))
	}
	if got := linkKeys(t, lis6); !slices.Equal(got, []string{"fe80::b/128 20/21"}) {
		t.Errorf("listener keys %v after the revoke, want k1 alone for fe80::b", got)
	}
	if err := e.net.Exchange(acc, client, 3); err != nil {
		t.Fatalf("exchange after the revoke: %v", err)
	}
	if i := info(t, acc); i.PktBad != 0 || i.CurrentKey != k1.send {
		t.Errorf("swp1's session after the revoke: %+v, want pkt_bad 0, current k1", i)
	}

	// k3 comes (an older send start: k1 stays current); a revoke of k3
	// scoped to the neighbour by its interface takes it off its session
	// and off the listener's entry for the address it learned.
	k3 := testKey{name: "k3", send: 40, recv: 41, secret: "daemon-test-secret-k3-Zr4", sendStart: now.Add(-3 * time.Hour)}
	e.refreshWith(k1, k3)
	e.waitFor("k3 on swp1's session and the listener", func() bool {
		return slices.Equal(keyIDs(t, acc), ids(k1, k3)) && slices.Contains(linkKeys(t, lis6), "fe80::b/128 40/41")
	})
	res, err = e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k3.name, Peer: "swp1"})
	if err != nil {
		t.Fatalf("Revoke --peer swp1: %v", err)
	}
	var deleted, listenerGone bool
	for _, s := range res.Sockets {
		switch {
		case s.Socket == "peer "+peer.OnLink("swp1", "").String():
			deleted = s.Action == control.ActionDeleted && s.Error == ""
		case strings.HasPrefix(s.Socket, "listen ") && s.Peer == "fe80::b/128":
			listenerGone = s.Action == control.ActionDeleted && s.Error == ""
		}
	}
	if res.Peer != "swp1" || !deleted || !listenerGone {
		t.Errorf("revoke --peer swp1: peer %q, outcomes %+v; want swp1, its session's and the fe80::b entry's k3 deleted", res.Peer, res.Sockets)
	}
	if got := keyIDs(t, acc); !slices.Equal(got, ids(k1)) {
		t.Errorf("swp1's session keys %v after the scoped revoke, want %v", got, ids(k1))
	}
	e.d.Kick()
	e.quiet(time.Second)
	if got := linkKeys(t, lis6); slices.Contains(got, "fe80::b/128 40/41") {
		t.Errorf("listener keys %v after the scoped revoke and a pass: k3 came back for fe80::b", got)
	}
	if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name, Peer: "swp7"}); err == nil {
		t.Error("a revoke scoped to swp7, which no binding binds, was taken")
	}
}

// addMirror adds to s the key the far end holds for k, toward local.
func addMirror(t testing.TB, s *tcpaotest.Sock, k testKey, local netip.Addr) {
	t.Helper()
	m := k.mirror()
	m.Peer = netip.PrefixFrom(local, local.BitLen())
	if err := s.AddKey(m, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Secret.Zero()
}

// TestConnectKeysInterfaceNeighbour (issue 53, item 3): the speaker's own
// connect to a link-local address on a link (connect()'s scope id, the
// zone) is keyed with the binding of the interface neighbour on that
// link, whether or not the speaker has reported the address yet; a
// link-local connect without its link, or on a link nothing binds, is not
// aokeyd's.
func TestConnectKeysInterfaceNeighbour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2"}
		o := testKey{name: "o1", send: 50, recv: 51, secret: "daemon-test-secret-o1-Hn3", chain: "other"}
		e := newEnv(t, envOptions{policy: linkPolicy, keys: []testKey{k1, o}})
		e.waitKeys("listener", e.lis, ids(k1))
		for _, c := range []struct {
			dst  string
			want string // "": not answered for
		}{
			{"[fe80::b%swp1]:179", "fe80::b/128 20/21"},
			{"[fe80::b%swp9]:179", "fe80::b/128 50/51"},
			{"[fe80::c%eth0]:179", "fe80::c/128 50/51"},
			{"192.0.2.2:179", "192.0.2.2/32 20/21"},
			{"[fe80::b%swp4]:179", ""},
			{"[fe80::b]:179", ""},
			{"[fe80::b%swp1]:180", ""},
		} {
			keys, cur, _, ok := e.d.ConnectKeys(speakerPID, netip.MustParseAddrPort(c.dst))
			var got []string
			for _, k := range keys {
				got = append(got, fmt.Sprintf("%s %d/%d", k.Peer, k.SendID, k.RecvID))
				k.Secret.Zero()
			}
			switch {
			case c.want == "" && ok:
				t.Errorf("connect to %s: keys %v, want none (not aokeyd's)", c.dst, got)
			case c.want != "" && (!ok || !slices.Equal(got, []string{c.want}) || cur != keys[0].SendID):
				t.Errorf("connect to %s: keys %v current %d (answered %t), want %s, current", c.dst, got, cur, ok, c.want)
			}
		}
	})
}
