//go:build linux

package gobgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// aoKey is one side's MKT for the test session (A: send 10 recv 20; the peer
// B holds the mirror image). The secret is test-only.
func aoKey(peer netip.Addr, send, recv uint8) tcpao.Key {
	return tcpao.Key{
		KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(peer, peer.BitLen()), SendID: send, RecvID: recv},
		Algorithm: tcpao.HMACSHA256,
		Secret:    tcpao.NewSecret([]byte("aokeyd-guest-ao-test-key")),
	}
}

func TestGuestAO(t *testing.T) {
	kerneltest.Require(t)
	lab.RequireNetns(t)
	nsA, nsB := lab.Pair(t, prefixA, prefixB)
	a := lab.StartGobgpd(t, nsA, "a", lab.GobgpdConfig{AS: 65001, RouterID: addrA,
		Neighbors: []lab.Neighbor{{Addr: addrB, AS: 65002, Passive: true}}}, lab.GobgpdOptions{Debug: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	p := lab.WaitPeer(t, a.Speaker, addrB, 60*time.Second, func(bgp.PeerInfo) bool { return true })
	if !p.Passive || p.MD5 {
		t.Fatalf("inventory: %+v", p)
	}

	// AO keys on gobgpd's IPv4 listener, through the duplicate.
	v4 := a.ListenerV4(t)
	keyA := aoKey(addrB, 10, 20)
	defer keyA.Secret.Zero()
	if err := sockets.WithSocket(v4, func(fd int) error { return tcpao.FromFD(fd).AddKey(keyA, tcpao.AddOptions{}) }); err != nil {
		t.Fatal(err)
	}
	if err := sockets.WithSocket(v4, func(fd int) error {
		ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
		if err == nil && (len(ks) != 1 || ks[0].SendID != 10 || ks[0].RecvID != 20) {
			t.Errorf("listener keys: %v", ks)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	obs := lab.NewObserver()
	tr := bgp.NewTracker(a.Speaker, sockets.System{}, obs, bgp.TrackerOptions{})
	go func() { _ = tr.Run(ctx) }()

	dst := netip.AddrPortFrom(addrA, 179)
	// Without a key: refused (the SYN is dropped, the dial times out).
	if c, err := lab.DialFrom(nsB, dst, 5*time.Second, nil); err == nil {
		c.Close()
		t.Fatal("connection without TCP-AO was accepted by the keyed listener")
	} else if !lab.Unanswered(err) {
		t.Fatalf("dial without key: %v (want a timeout)", err)
	}

	// With the mirror key: the BGP session comes up.
	keyB := aoKey(addrA, 20, 10)
	defer keyB.Secret.Zero()
	c, err := lab.DialFrom(nsB, dst, 20*time.Second, func(fd int) error { return tcpao.FromFD(fd).AddKey(keyB, tcpao.AddOptions{}) })
	if err != nil {
		t.Fatalf("dial with the right TCP-AO key: %v", err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	if err := bgpHandshake(c, 65002, addrB, stop); err != nil {
		t.Fatalf("BGP handshake over TCP-AO: %v", err)
	}
	lab.WaitPeer(t, a.Speaker, addrB, 60*time.Second, bgp.PeerInfo.Established)

	// The tracker hands over the accepted socket, which carries the key.
	up := obs.WaitUp(t, 60*time.Second)
	ref := up.Sock.Ref()
	if ref.Local.Port() != 179 || ref.Remote.Addr().Unmap() != addrB {
		t.Fatalf("accepted socket %s", ref)
	}
	// Through the same bridge the rotator uses (one duplicate per call).
	s := bgp.AOSocket(up.Sock)
	ks, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 1 || ks[0].SendID != 10 || ks[0].RecvID != 20 || ks[0].Fingerprint != keyA.Secret.Fingerprint() {
		t.Errorf("accepted socket keys: %v", ks)
	}
	info, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.PktGood == 0 || info.PktBad != 0 {
		t.Errorf("accepted socket counters: good %d bad %d", info.PktGood, info.PktBad)
	}
	t.Logf("BGP session over TCP-AO established on gobgpd's accepted socket %s", ref)
}
