package gobgp

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"sync"
	"testing"

	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// addrAPI answers ListPeer as gobgpd does: a request with an address gets
// that neighbor only. It records the addresses asked for.
type addrAPI struct {
	*fakeAPI
	mu    sync.Mutex
	asked []string
}

func (a *addrAPI) ListPeer(ctx context.Context, r *api.ListPeerRequest, _ ...grpc.CallOption) (api.GobgpApi_ListPeerClient, error) {
	a.mu.Lock()
	a.asked = append(a.asked, r.GetAddress())
	a.mu.Unlock()
	a.fakeAPI.mu.Lock()
	defer a.fakeAPI.mu.Unlock()
	var out []*api.Peer
	for _, p := range a.fakeAPI.peers {
		if r.GetAddress() == "" || r.GetAddress() == p.GetConf().GetNeighborAddress() {
			out = append(out, p)
		}
	}
	return &listStream{ctx: ctx, peers: out}, nil
}

// TestPeerAsksForOneNeighbor: Peer sends ListPeerRequest{Address} for the
// neighbor alone, finds it (or says ErrNoPeer), and every call is counted
// by method, in RPCs and through OnRPC.
func TestPeerAsksForOneNeighbor(t *testing.T) {
	f := &addrAPI{fakeAPI: &fakeAPI{}}
	var others []*api.Peer
	for _, a := range []string{"10.255.0.2", "10.255.0.3", "10.255.0.4"} {
		others = append(others, listed(a, api.PeerState_ESTABLISHED, 0, true, "", 1700000000))
	}
	f.setPeers(others...)
	var mu sync.Mutex
	hooked := map[string]uint64{}
	s := New(f, Options{OnRPC: func(m string) { mu.Lock(); hooked[m]++; mu.Unlock() }})

	tests := []struct {
		name     string
		neighbor string
		vrf      string
		noPeer   bool
	}{
		{name: "configured neighbor", neighbor: "10.255.0.3"},
		{name: "unknown neighbor", neighbor: "10.255.0.9", noPeer: true},
		{name: "other vrf", neighbor: "10.255.0.2", vrf: "blue", noPeer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := netip.MustParseAddr(tt.neighbor)
			p, err := s.Peer(context.Background(), peer.KeyOf(n, tt.vrf))
			if tt.noPeer {
				if !errors.Is(err, bgp.ErrNoPeer) {
					t.Fatalf("Peer(%s) = %+v, %v; want ErrNoPeer", n, p, err)
				}
			} else if err != nil || p.Neighbor != n || !p.Established() {
				t.Fatalf("Peer(%s) = %+v, %v; want it established", n, p, err)
			}
			f.mu.Lock()
			last := f.asked[len(f.asked)-1]
			f.mu.Unlock()
			if last != tt.neighbor {
				t.Errorf("ListPeer asked for %q, want %q alone", last, tt.neighbor)
			}
		})
	}
	if _, err := s.Peers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetPeer(context.Background(), peer.KeyOf(netip.MustParseAddr("10.255.0.2"), ""), "test"); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{MethodListPeer: 4, MethodWatchEvent: 0, MethodResetPeer: 1}
	if got := s.RPCs(); !maps.Equal(got, want) {
		t.Errorf("RPCs() = %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	delete(want, MethodWatchEvent)
	if !maps.Equal(hooked, want) {
		t.Errorf("OnRPC saw %v, want %v", hooked, want)
	}
}
