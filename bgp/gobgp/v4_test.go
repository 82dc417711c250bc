package gobgp

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	apiv4 "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// v4Server is gobgpd v4's gRPC service in miniature: one neighbor, a peer
// event stream it feeds, and the ResetPeer requests it got.
type v4Server struct {
	apiv4.UnimplementedGoBgpServiceServer
	mu     sync.Mutex
	peer   *apiv4.Peer
	events chan *apiv4.WatchEventResponse
	resets []string
}

func (s *v4Server) GetBgp(context.Context, *apiv4.GetBgpRequest) (*apiv4.GetBgpResponse, error) {
	return &apiv4.GetBgpResponse{Global: &apiv4.Global{Asn: 65001}}, nil
}

func (s *v4Server) ListPeer(r *apiv4.ListPeerRequest, st grpc.ServerStreamingServer[apiv4.ListPeerResponse]) error {
	s.mu.Lock()
	p := s.peer
	s.mu.Unlock()
	if r.GetAddress() != "" && r.GetAddress() != p.GetConf().GetNeighborAddress() {
		return nil
	}
	return st.Send(&apiv4.ListPeerResponse{Peer: p})
}

func (s *v4Server) WatchEvent(_ *apiv4.WatchEventRequest, st grpc.ServerStreamingServer[apiv4.WatchEventResponse]) error {
	for {
		select {
		case <-st.Context().Done():
			return nil
		case e := <-s.events:
			if err := st.Send(e); err != nil {
				return err
			}
		}
	}
}

func (s *v4Server) ResetPeer(_ context.Context, r *apiv4.ResetPeerRequest) (*apiv4.ResetPeerResponse, error) {
	s.mu.Lock()
	s.resets = append(s.resets, r.GetAddress()+" "+r.GetCommunication())
	s.mu.Unlock()
	return &apiv4.ResetPeerResponse{}, nil
}

// v3Server is gobgpd v3's service in miniature: one neighbor.
type v3Server struct {
	api.UnimplementedGobgpApiServer
	peer *api.Peer
}

func (s *v3Server) ListPeer(_ *api.ListPeerRequest, st api.GobgpApi_ListPeerServer) error {
	return st.Send(&api.ListPeerResponse{Peer: s.peer})
}

func (s *v3Server) ResetPeer(context.Context, *api.ResetPeerRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// serve runs a gRPC server with register's services on a unix socket and
// returns its target.
func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gobgpd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return "unix://" + sock
}

func v4Peer(addr string, ss apiv4.PeerState_SessionState, as apiv4.PeerState_AdminState) *apiv4.Peer {
	return &apiv4.Peer{
		Conf:      &apiv4.PeerConf{NeighborAddress: addr, PeerAsn: 65002, Vrf: "red"},
		State:     &apiv4.PeerState{SessionState: ss, AdminState: as, Flops: 3},
		Transport: &apiv4.Transport{LocalAddress: "10.255.0.1", LocalPort: 179, RemotePort: 40001, PassiveMode: true},
		Timers:    &apiv4.Timers{State: &apiv4.TimersState{Uptime: timestamppb.New(time.Unix(1700000000, 0))}},
	}
}

// TestV4Speaker: against gobgpd v4's service (api.GoBgpService over real
// gRPC), with the line given and detected: ListPeer converts the neighbor
// (v4's enum values differ from v3's), the watch relays state events after
// its sync, ResetPeer reaches the server. A v3 server is detected as v3.
func TestV4Speaker(t *testing.T) {
	for _, line := range []string{APIv4, APIAuto} {
		t.Run("api="+line, func(t *testing.T) {
			srv := &v4Server{peer: v4Peer("10.255.0.2", apiv4.PeerState_SESSION_STATE_ESTABLISHED, apiv4.PeerState_ADMIN_STATE_UP),
				events: make(chan *apiv4.WatchEventResponse, 1)}
			target := serve(t, func(g *grpc.Server) { apiv4.RegisterGoBgpServiceServer(g, srv) })
			sp, closer, err := Dial(target, Options{API: line})
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k := peer.KeyOf(netipAddr("10.255.0.2"), "red")
			p, err := sp.Peer(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			want := bgp.PeerInfo{Neighbor: k.Addr, VRF: "red", Local: netipAddr("10.255.0.1"), LocalPort: 179, RemotePort: 40001,
				State: bgp.StateEstablished, Admin: bgp.AdminUp, Flops: 3, Passive: true, PeerASN: 65002, Uptime: time.Unix(1700000000, 0)}
			if !p.Uptime.Equal(want.Uptime) {
				t.Errorf("uptime %v, want %v", p.Uptime, want.Uptime)
			}
			p.Uptime = want.Uptime
			if p != want {
				t.Errorf("peer %+v\nwant %+v", p, want)
			}
			evs, err := sp.Watch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if e := <-evs; e.Kind != bgp.EventSync || len(e.Peers) != 1 {
				t.Fatalf("first event %+v, want the sync with one peer", e)
			}
			down := v4Peer("10.255.0.2", apiv4.PeerState_SESSION_STATE_IDLE, apiv4.PeerState_ADMIN_STATE_PFX_CT)
			srv.events <- &apiv4.WatchEventResponse{Event: &apiv4.WatchEventResponse_Peer{Peer: &apiv4.WatchEventResponse_PeerEvent{Type: apiv4.WatchEventResponse_PeerEvent_TYPE_STATE, Peer: down}}}
			if e := <-evs; e.Kind != bgp.EventState || e.Peer.State != bgp.StateIdle || e.Peer.Admin != bgp.AdminPrefixLimit || !e.Peer.Partial {
				t.Fatalf("state event %+v, want idle, prefix limit, partial", e)
			}
			if err := sp.ResetPeer(ctx, k, "aokeyd: revoke"); err != nil {
				t.Fatal(err)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if !slices.Equal(srv.resets, []string{"10.255.0.2 aokeyd: revoke"}) {
				t.Errorf("resets %q", srv.resets)
			}
		})
	}
	t.Run("auto_on_v3", func(t *testing.T) {
		srv := &v3Server{peer: listed("10.255.0.3", api.PeerState_ESTABLISHED, 0, true, "", 1700000000)}
		target := serve(t, func(g *grpc.Server) { api.RegisterGobgpApiServer(g, srv) })
		sp, closer, err := Dial(target, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		ps, err := sp.Peers(context.Background())
		if err != nil || len(ps) != 1 || ps[0].Neighbor != netipAddr("10.255.0.3") || ps[0].State != bgp.StateEstablished {
			t.Fatalf("Peers on a v3 server: %+v, %v", ps, err)
		}
	})
	t.Run("bad_line", func(t *testing.T) {
		if _, _, err := Dial("unix:///nonexistent", Options{API: "v5"}); err == nil {
			t.Fatal("API v5 accepted")
		}
	})
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
