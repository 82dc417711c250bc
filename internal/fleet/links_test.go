package fleet

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// linkPeer is an interface neighbour (issue 53) on iface that learned addr.
func linkPeer(iface, addr string, keys ...Key) Peer {
	p := peer("192.0.2.99", keys...)
	p.ID, p.Neighbor = peerkey.OnLink(iface, ""), netip.MustParseAddr(addr)
	return p
}

// TestLinkPeers: an interface neighbour is a peer of the document by its
// link, so two links whose neighbours learned one link-local address are
// two peers; the document carries the link and the learned address and
// reads back the same; the join pairs the two ends of an unnumbered link
// by the learned addresses, as it pairs addresses.
func TestLinkPeers(t *testing.T) {
	a := key("a", 1, 1, true, true)
	r1 := router("r1", "fe80::1", linkPeer("swp1", "fe80::2", a), linkPeer("swp2", "fe80::2", a))
	b, err := json.Marshal(r1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"address":"fe80::2","interface":"swp1"`, `"address":"fe80::2","interface":"swp2"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document %s: want %s", b, want)
		}
	}
	var back Document
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Peers) != 2 || back.Peers[0].ID == back.Peers[1].ID ||
		back.Peers[0].ID != peerkey.OnLink("swp1", "") || back.Peers[0].Neighbor != netip.MustParseAddr("fe80::2") {
		t.Fatalf("read back %+v, want swp1 and swp2, each with fe80::2", back.Peers)
	}
	for _, bad := range []string{`{"address":"fe80::2","interface":"1bad name"}`, `{"address":"nope","interface":"swp1"}`} {
		var p Peer
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s read as %+v, want an error", bad, p)
		}
	}

	// r1 swp1 <-> r2 swp9: the two ends learned each other's address.
	r1 = router("r1", "fe80::1", linkPeer("swp1", "fe80::2", a))
	r2 := router("r2", "fe80::2", linkPeer("swp9", "fe80::1", a))
	links := Join([]Document{r1, r2}, JoinOptions{Now: t0})
	var names []string
	for _, l := range links {
		names = append(names, l.Name())
	}
	if !slices.Equal(names, []string{"r1 <-> r2"}) || links[0].B == nil || links[0].A.Peer.ID != peerkey.OnLink("swp1", "") {
		t.Errorf("links %v %+v, want r1 swp1 <-> r2 swp9", names, links)
	}
}

// TestKeyOfLinkPeer: the publisher names an interface neighbour of status
// by its interface, whatever address it learned (two links with one
// address are two peers), and keeps the address beside it.
func TestKeyOfLinkPeer(t *testing.T) {
	for _, ps := range []control.PeerStatus{{Peer: "fe80::2", Interface: "swp1"}, {Peer: "none", Interface: "swp1"}} {
		if id, ok := keyOf(ps); !ok || id != peerkey.OnLink("swp1", "") {
			t.Errorf("keyOf(%+v) = %v, %t; want swp1 interface", ps, id, ok)
		}
	}
	p := Publisher{since: map[peerkey.Key]sinceRec{}}
	out := p.peer(peerkey.OnLink("swp1", ""), control.PeerStatus{Peer: "fe80::2", Interface: "swp1"}, t0, map[netip.Addr]bool{})
	if out.Neighbor != netip.MustParseAddr("fe80::2") || out.Addr() != out.Neighbor {
		t.Errorf("published %+v, want the learned address fe80::2", out)
	}
}
