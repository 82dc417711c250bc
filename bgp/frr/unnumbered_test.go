package frr

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
)

// TestInterfaceNeighbours: the speaker lists FRR's interface neighbours
// (issue 53) under their link, asks bgpd about one by its interface and
// clears it by its interface; the passive configuration of one is read by
// its interface too; its uptime is kept per learned address.
func TestInterfaceNeighbours(t *testing.T) {
	f := newFake(t)
	f.set("show bgp vrf all neighbors json", fixture(t, "vrf-all-unnumbered-synthetic.json"))
	f.set(runningConfig, []byte("router bgp 65001\n neighbor swp1 interface remote-as external\n neighbor swp1 passive\n"+
		"router bgp 65001 vrf red\n neighbor swp3 interface remote-as external\n"))
	f.set("show bgp vrf default neighbors swp1 ", fixture(t, "vrf-default-neighbor-swp1-synthetic.json"))
	f.set("clear bgp vrf red swp3", nil)
	s := New(Options{Runner: f})
	ctx := context.Background()
	ps, err := s.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Key().String()] = p.Shown()
		if p.Key() == peerkey.OnLink("swp1", "") && (!p.Passive || p.Uptime.Unix() != 1796094377) {
			t.Errorf("swp1 = %+v, want passive (by its interface), up at its epoch", p)
		}
	}
	want := map[string]string{"10.255.9.2": "10.255.9.2", "swp1 interface": "swp1 (fe80::253:ff:fe00:201)", "swp2 interface": "swp2 (none)",
		"swp3 interface vrf red": "swp3 vrf red (fe80::253:ff:fe00:201)"}
	if len(got) != len(want) {
		t.Fatalf("Peers = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Peers[%s] = %q, want %q", k, got[k], v)
		}
	}
	p, err := s.Peer(ctx, peerkey.OnLink("swp1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if last := f.calls[len(f.calls)-1]; last != "show bgp vrf default neighbors swp1 json" {
		t.Errorf("Peer(swp1) asked %q", last)
	}
	if p.Neighbor != netip.MustParseAddr("fe80::253:ff:fe00:201") || !p.Passive || !p.Established() {
		t.Errorf("Peer(swp1) = %+v", p)
	}
	f.set("show bgp vrf default neighbors swp9 ", []byte(`{"warning":"No such neighbor in this view/vrf"}`))
	if _, err := s.Peer(ctx, peerkey.OnLink("swp9", "")); !errors.Is(err, bgp.ErrNoPeer) {
		t.Errorf("Peer(swp9), no neighbour's interface: %v, want ErrNoPeer", err)
	}
	if err := s.ResetPeer(ctx, peerkey.OnLink("swp3", "red"), "revoked"); err != nil {
		t.Fatal(err)
	}
	if last := f.calls[len(f.calls)-1]; last != "clear bgp vrf red swp3" {
		t.Errorf("ResetPeer(swp3 vrf red) ran %q", last)
	}
	if err := s.ResetPeer(ctx, peerkey.Key{}, "x"); err == nil || strings.Contains(strings.Join(f.calls, "\n"), "clear bgp vrf default \n") {
		t.Errorf("ResetPeer of no peer: %v", err)
	}
}

// TestWatchInterfaceNeighbours: the poll follows interface neighbours by
// their interface: two that learned nothing yet are two peers, and one
// whose learned address changes while up is one event for it with the new
// address, not a new neighbour beside an old one reported down (the old
// address's Idle, sent last, would have read as the neighbour going down
// and brought its old address back).
func TestWatchInterfaceNeighbours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		listing := string(fixture(t, "vrf-all-unnumbered-synthetic.json"))
		f := newFake(t)
		f.set("show bgp vrf all neighbors json", []byte(strings.Replace(listing, `"swp2":{`, `"swp4":{"bgpNeighborAddr":"none"},"swp2":{`, 1)))
		s := New(Options{Runner: f, PollInterval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := s.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-ch
		var keys []string
		for _, p := range ev.Peers {
			keys = append(keys, p.Key().String())
		}
		slices.Sort(keys)
		if want := []string{"10.255.9.2", "swp1 interface", "swp2 interface", "swp3 interface vrf red", "swp4 interface"}; ev.Kind != bgp.EventSync || !slices.Equal(keys, want) {
			t.Fatalf("first event %v %q, want a sync of %q", ev.Kind, keys, want)
		}
		// swp1's neighbour came back with a new MAC: a new address, the
		// same ports and counts (FRR's connection may look the same).
		f.set("show bgp vrf all neighbors json", []byte(strings.ReplaceAll(listing, "fe80::253:ff:fe00:201", "fe80::253:ff:fe00:299")))
		var got []string
		for range 2 { // swp1 and swp3 (whose address the replace moved too)
			select {
			case ev := <-ch:
				got = append(got, ev.Peer.Shown()+" "+ev.Peer.State.String())
			case <-time.After(time.Minute):
				t.Fatalf("events %q, want two", got)
			}
		}
		slices.Sort(got)
		if want := []string{"swp1 (fe80::253:ff:fe00:299) established", "swp3 vrf red (fe80::253:ff:fe00:299) established"}; !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(ch) != 0 {
			ev := <-ch
			t.Fatalf("an event besides: %v %s %s (swp4 went, no other)", ev.Kind, ev.Peer.Shown(), ev.Peer.State)
		}
	})
}
