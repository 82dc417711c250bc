package daemon_test

import (
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The pieces every many-peer benchmark and test of this package builds its
// fleet from: the peer count, the peers, and the speaker's listener.

// envPeers is a fleet's size: def, or the count in the environment
// variable name (1..60000).
func envPeers(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 60000 {
		t.Fatalf("%s=%q: want a count of peers in 1..60000", name, s)
	}
	return n
}

// fleetPeer is peer i of a fleet, in 10.1.0.0/16.
func fleetPeer(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }

// passivePeer is the speaker's view of fleet peer i before its session is
// up: a passive neighbour of localAddr.
func passivePeer(i int) bgp.PeerInfo {
	return bgp.PeerInfo{Neighbor: fleetPeer(i), Local: localAddr, State: bgp.StateActive, Passive: true, PeerASN: 65002}
}

// listenOn opens the speaker's listener on localAddr:bgpPort in net and
// lets disc find it.
func listenOn(t testing.TB, net *tcpaotest.Net, disc *fakeDiscoverer) (*tcpaotest.Sock, *countingSocket) {
	t.Helper()
	lis, err := net.Socket(localAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := lis.Listen(); err != nil {
		t.Fatal(err)
	}
	return lis, disc.add(lis, netip.AddrPortFrom(localAddr, bgpPort), netip.AddrPort{}, true)
}
