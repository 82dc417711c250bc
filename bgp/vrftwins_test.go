package bgp_test

import (
	"context"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// twinObs records the observer calls with the session's VRF.
type twinObs struct{ calls chan string }

func (o *twinObs) OnEstablished(_ context.Context, p bgp.PeerInfo, s bgp.SocketHandle) {
	o.calls <- "up " + p.Neighbor.String() + " vrf " + p.VRF
}
func (o *twinObs) OnDown(_ context.Context, p bgp.PeerInfo) {
	o.calls <- "down " + p.Neighbor.String() + " vrf " + p.VRF
}

// TestVRFTwins: the same neighbor address in two VRFs is two sessions to
// the tracker and the guard. Both are handed over (neither takes the
// other's place); one dropping reports that one alone; and a step on the
// other, bracketed by the guard while its twin drops and comes back, is
// not taken for a drop.
func TestVRFTwins(t *testing.T) {
	sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 7)
	_, blue := connect(disc, 179, 40000), connect(disc, 179, 40001)
	obs := &twinObs{calls: make(chan string, 16)}
	tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{})
	redKey := peer.KeyOf(nbr, "red")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Run(ctx) }()
	twin := func(vrf string, rport uint16, state bgp.SessionState) bgp.PeerInfo {
		return bgp.PeerInfo{Neighbor: nbr, Local: local, LocalPort: 179, RemotePort: rport, State: state, VRF: vrf, Uptime: t0, Passive: true}
	}
	expect := func(want ...string) {
		t.Helper()
		got := map[string]int{}
		for range want {
			select {
			case c := <-obs.calls:
				got[c]++
			case <-time.After(5 * time.Second):
				t.Fatalf("observer calls %v, want %v", got, want)
			}
		}
		for _, w := range want {
			if got[w] == 0 {
				t.Fatalf("observer calls %v, want %v", got, want)
			}
			got[w]--
		}
		select {
		case c := <-obs.calls:
			t.Fatalf("observer call %q besides %v", c, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
	sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{twin("red", 40000, bgp.StateEstablished), twin("blue", 40001, bgp.StateEstablished)}})
	expect("up "+nbr.String()+" vrf red", "up "+nbr.String()+" vrf blue")
	if p, ok := vouched(tr, redKey); !ok || p.VRF != "red" || p.RemotePort != 40000 {
		t.Fatalf("the tracker's red session: %+v (held %t)", p, ok)
	}

	g := bgp.NewGuard(tr, nil)
	if err := g.Before(ctx, redKey, "announce"); err != nil { // red's step
		t.Fatalf("Before on red: %v", err)
	}
	// Blue flaps during red's step, and comes back on a new connection.
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: twin("blue", 0, bgp.StateIdle)})
	expect("down " + nbr.String() + " vrf blue")
	disc.Drop(blue.Inode)
	connect(disc, 179, 40002)
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: twin("blue", 40002, bgp.StateEstablished)})
	expect("up " + nbr.String() + " vrf blue")
	if err := g.After(ctx, redKey, "announce"); err != nil {
		t.Fatalf("After on red, whose session stayed up while blue flapped: %v", err)
	}
	if p, ok := tr.CachedPeer(redKey); !ok || p.RemotePort != 40000 {
		t.Fatalf("the tracker lost red's session to blue's: %+v (held %t)", p, ok)
	}
}
