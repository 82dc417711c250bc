package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// linkPolicy binds the test neighbor by address and FRR's interface
// neighbours (issue 53) by interface: swp1 to swp3 to chain core, swp9 and
// eth0 to chain other.
const linkPolicy = `version: 1
key_chains:
  - name: core
  - name: other
peers:
  - {neighbor: 192.0.2.2, key_chain: core}
  - {neighbor_interface: [swp1, swp2, swp3], key_chain: core}
  - {neighbor_interface: [swp9, eth0], key_chain: other}
`

// linkKeys are the host keys the socket s holds, as "PREFIX send/recv".
func linkKeys(t testing.TB, s tcpao.Socket) []string {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		return nil
	}
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%s %d/%d", k.Peer, k.SendID, k.RecvID))
	}
	slices.Sort(out)
	return out
}

// TestListenerKeysLearnedAddresses: the listener holds a key for the
// address each interface neighbour a neighbor_interface binding binds has
// learned, as soon as the speaker reports it (before any session), so the
// neighbour's first session comes up signed through it; one address
// learned on two links with one chain is one key (keys carry no link);
// with two chains the second is refused with a status warning naming
// both; a relearned address moves the key; a neighbour nothing binds gets
// none.
func TestListenerKeysLearnedAddresses(t *testing.T) {
	synctest.Test(t, testListenerKeysLearnedAddresses)
}

func testListenerKeysLearnedAddresses(t *testing.T) {
	k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2"}
	o := testKey{name: "o1", send: 50, recv: 51, secret: "daemon-test-secret-o1-Hn3", chain: "other"}
	e := newEnv(t, envOptions{policy: linkPolicy, keys: []testKey{k1, o}})
	e.waitKeys("listener", e.lis, ids(k1))
	lis6 := e.listen6()

	llB, llC := netip.MustParseAddr("fe80::b"), netip.MustParseAddr("fe80::c")
	link := func(name string, addr netip.Addr) bgp.PeerInfo {
		return bgp.PeerInfo{Link: peer.LinkOf(name), Neighbor: addr, State: bgp.StateActive, Passive: true}
	}
	keyB, keyC := "fe80::b/128 20/21", "fe80::c/128 20/21"
	e.sp.Set(link("swp1", netip.Addr{})) // nothing learned yet: nothing to key
	e.sp.Set(link("swp4", llC))          // bound by no binding
	e.sp.Set(link("swp1", llB))
	e.waitFor("the listener keyed for swp1's learned fe80::b", func() bool { return slices.Equal(linkKeys(t, lis6), []string{keyB}) })

	// swp1's neighbour connects from fe80::b on its link with k1: the
	// listener takes it, signed.
	client, err := e.net.Socket(llB)
	if err != nil {
		t.Fatal(err)
	}
	m := k1.mirror()
	m.Peer = netip.MustParsePrefix("fe80::a/128")
	if err := client.AddKey(m, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Secret.Zero()
	acc, err := e.net.ConnectTo(client, lis6, netip.MustParseAddr("fe80::a%swp1"))
	if err != nil {
		t.Fatalf("swp1's neighbour connecting signed: %v", err)
	}
	if got := linkKeys(t, acc); !slices.Equal(got, []string{keyB}) {
		t.Errorf("the accepted session holds %v, want the listener's key for fe80::b", got)
	}
	if err := e.net.Exchange(client, acc, 2); err != nil {
		t.Errorf("exchange on the signed session: %v", err)
	}

	// swp2 learns the same address, bound to the same chain: one key.
	e.sp.Set(link("swp2", llB))
	// swp9 learns it too, bound to another chain: refused, with a warning.
	e.sp.Set(link("swp9", llB))
	e.waitFor("a warning about swp9's address", func() bool { return warned(t, e, "swp9 (fe80::b)") })
	if got := linkKeys(t, lis6); !slices.Equal(got, []string{keyB}) {
		t.Errorf("listener keys %v, want one key for fe80::b (swp1 and swp2 share it, swp9 refused)", got)
	}
	w := warned(t, e, "interface neighbours swp1 (fe80::b) and swp9 (fe80::b) learned one address with different key chains (core, other)")
	if !w {
		t.Errorf("status warnings do not name both links and chains")
	}
	// eth0, first in key order, learns it too: swp1 keeps the address it
	// held, eth0 is the one refused.
	e.sp.Set(link("eth0", llB))
	e.waitFor("a warning about eth0's address", func() bool {
		return warned(t, e, "interface neighbours swp1 (fe80::b) and eth0 (fe80::b) learned one address with different key chains (core, other)")
	})
	if got := linkKeys(t, lis6); !slices.Equal(got, []string{keyB}) {
		t.Errorf("listener keys %v after eth0 learned fe80::b, want swp1's key kept", got)
	}
	e.sp.Set(link("eth0", netip.Addr{}))

	// swp1 and swp2 relearn: the key follows; swp9 alone holds fe80::b now.
	e.sp.Set(link("swp1", llC))
	e.sp.Set(link("swp2", llC))
	e.waitFor("the key moved to fe80::c, swp9 keyed for fe80::b", func() bool {
		return slices.Equal(linkKeys(t, lis6), []string{"fe80::b/128 50/51", keyC})
	})
	if warned(t, e, "swp9 (fe80::b) learned one address") {
		t.Error("a warning about swp9 stays after the collision ended")
	}
	if got := keyIDs(t, e.lis); !slices.Equal(got, ids(k1)) {
		t.Errorf("the IPv4 listener holds %v, want the address binding's key alone", got)
	}
	// aoctl status swp1: the speaker's neighbour, managed (its session
	// is down), under its interface and learned address.
	rep, err := e.d.Status(context.Background(), "swp1")
	if err != nil || len(rep.Peers) != 1 || rep.Peers[0].Interface != "swp1" || rep.Peers[0].Peer != "fe80::c" {
		t.Errorf("status of swp1: %+v, %v", rep.Peers, err)
	}
	if _, err = e.d.Status(context.Background(), "swp4"); err == nil || !strings.Contains(err.Error(), "peer swp4 has no TCP-AO binding") {
		t.Errorf("status of swp4, which nothing binds: %v", err)
	}
}

// listen6 opens the speaker's IPv6 wildcard listener, which holds the
// interface neighbours' keys, and has the daemon find it.
func (e *env) listen6() *tcpaotest.Sock {
	e.t.Helper()
	lis6, err := e.net.Socket(netip.IPv6Unspecified())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := lis6.Listen(); err != nil {
		e.t.Fatal(err)
	}
	e.disc.add(lis6, netip.AddrPortFrom(netip.IPv6Unspecified(), bgpPort), netip.AddrPort{}, true)
	e.d.Kick()
	return lis6
}

// warned reports whether a status warning holds s.
func warned(t testing.TB, e *env, s string) bool {
	t.Helper()
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, s) })
}
