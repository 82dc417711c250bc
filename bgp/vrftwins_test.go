package bgp

import (
	"context"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

// twinObs records the observer calls with the session's VRF.
type twinObs struct{ calls chan string }

func (o *twinObs) OnEstablished(_ context.Context, p PeerInfo, s SocketHandle) {
	o.calls <- "up " + p.Neighbor.String() + " vrf " + p.VRF
}
func (o *twinObs) OnDown(_ context.Context, p PeerInfo) {
	o.calls <- "down " + p.Neighbor.String() + " vrf " + p.VRF
}

// TestVRFTwins: the same neighbor address in two VRFs is two sessions to
// the tracker and the guard. Both are handed over (neither takes the
// other's place); one dropping reports that one alone; and a step on the
// other, bracketed by the guard while its twin drops and comes back, is
// not taken for a drop.
func TestVRFTwins(t *testing.T) {
	sp := &fakeSpeaker{ch: make(chan Event), pid: 100}
	red, blue := conn(100, 7, 179, 40000), conn(100, 8, 179, 40001)
	disc := &fakeDisc{conns: map[int][]sockets.Ref{100: {red, blue}}}
	obs := &twinObs{calls: make(chan string, 16)}
	tr := NewTracker(sp, disc, obs, TrackerOptions{})
	redKey := peer.KeyOf(nbr, "red")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Run(ctx) }()
	twin := func(vrf string, rport uint16, state SessionState) PeerInfo {
		return PeerInfo{Neighbor: nbr, Local: local, LocalPort: 179, RemotePort: rport, State: state, VRF: vrf, Uptime: t0, Passive: true}
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
	sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{twin("red", 40000, StateEstablished), twin("blue", 40001, StateEstablished)}}
	expect("up "+nbr.String()+" vrf red", "up "+nbr.String()+" vrf blue")
	if p, ok := tr.CachedPeer(redKey); !ok || p.VRF != "red" || p.RemotePort != 40000 {
		t.Fatalf("the tracker's red session: %+v (held %t)", p, ok)
	}

	g := NewGuard(tr, nil)
	if err := g.Before(ctx, redKey, "announce"); err != nil { // red's step
		t.Fatalf("Before on red: %v", err)
	}
	// Blue flaps during red's step, and comes back on a new connection.
	sp.ch <- Event{Kind: EventState, Peer: twin("blue", 0, StateIdle)}
	expect("down " + nbr.String() + " vrf blue")
	blue2 := conn(100, 9, 179, 40002)
	disc.mu.Lock()
	disc.conns[100] = []sockets.Ref{red, blue2}
	disc.mu.Unlock()
	sp.ch <- Event{Kind: EventState, Peer: twin("blue", 40002, StateEstablished)}
	expect("up " + nbr.String() + " vrf blue")
	if err := g.After(ctx, redKey, "announce"); err != nil {
		t.Fatalf("After on red, whose session stayed up while blue flapped: %v", err)
	}
	if p, ok := tr.CachedPeer(redKey); !ok || p.RemotePort != 40000 {
		t.Fatalf("the tracker lost red's session to blue's: %+v (held %t)", p, ok)
	}
}
