package daemon_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// describingSpeaker reports each neighbor with an AS, a description and a
// last down, as FRR does.
type describingSpeaker struct {
	bgp.Speaker
	down time.Time
}

func (s describingSpeaker) about(p bgp.PeerInfo) bgp.PeerInfo {
	p.PeerASN, p.Flops = 65010, 2
	p.About = &bgp.PeerAbout{Description: "edge " + p.Neighbor.String(), LastDown: s.down, LastDownReason: "Peer closed the session"}
	return p
}

func (s describingSpeaker) Peers(ctx context.Context) ([]bgp.PeerInfo, error) {
	ps, err := s.Speaker.Peers(ctx)
	for i := range ps {
		ps[i] = s.about(ps[i])
	}
	return ps, err
}

func (s describingSpeaker) Peer(ctx context.Context, k peer.Key) (bgp.PeerInfo, error) {
	p, err := s.Speaker.Peer(ctx, k)
	return s.about(p), err
}

// Status says what birdc show protocols all and FRR's show bgp neighbors
// say of a neighbor, names the keys in use from the kernel's Current_key
// and RNext_key, and, for every peer, the key chains with the key sent
// with now.
func TestStatusNamesKeysAndNeighbor(t *testing.T) { synctest.Test(t, testStatusNamesKeysAndNeighbor) }

func testStatusNamesKeysAndNeighbor(t *testing.T) {
	down := time.Now().Add(-time.Hour).Truncate(time.Second)
	f := newRevokeFleet(t, fleetOptions{n: 2, speaker: func(s bgp.Speaker) bgp.Speaker { return describingSpeaker{Speaker: s, down: down} }})
	synctest.Wait()
	rep, err := f.d.Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Peers) != 2 {
		t.Fatalf("peers %+v", rep.Peers)
	}
	for _, p := range rep.Peers {
		if p.PeerAS != 65010 || p.Flaps != 2 || p.Description != "edge "+p.Peer || !p.LastDown.Equal(down) || p.LastDownReason != "Peer closed the session" {
			t.Errorf("%s: AS %d, flaps %d, %q, last down %s (%q): not as the speaker said", p.Peer, p.PeerAS, p.Flaps, p.Description, p.LastDown, p.LastDownReason)
		}
		// k1 is the newer key: the session sends with it and asks the
		// peer to.
		if p.Sending == nil || p.Sending.String() != "core/k1" || p.PeerSending == nil || p.PeerSending.String() != "core/k1" || p.PeerAsked != nil {
			t.Errorf("%s: sending %v, peer sending %v (asked %v); want core/k1 both ways", p.Peer, p.Sending, p.PeerSending, p.PeerAsked)
		}
	}
	if len(rep.Chains) != 1 || rep.Chains[0].Chain != "core" || rep.Chains[0].Sending == nil || rep.Chains[0].Sending.Name != "k1" {
		t.Errorf("chains %+v, want core sending k1", rep.Chains)
	}
	// A reload's settings that wait for a restart are status warnings.
	w := "/etc/aokeyd/aokeyd.yaml: key_source.file.path changed, and takes effect on restart only"
	f.d.SetConfigWarnings([]string{w})
	if rep, err = f.d.Status(context.Background(), ""); err != nil || !slices.Contains(rep.Warnings, w) {
		t.Errorf("warnings %q (%v), want the reload's", rep.Warnings, err)
	}
	f.d.SetConfigWarnings(nil)
	if rep, _ = f.d.Status(context.Background(), ""); slices.Contains(rep.Warnings, w) {
		t.Errorf("the reload's warning stayed: %q", rep.Warnings)
	}
	one, err := f.d.Status(context.Background(), f.addr(0).String())
	if err != nil || len(one.Chains) != 0 {
		t.Errorf("one peer's status: chains %+v (%v); want none", one.Chains, err)
	}
}
