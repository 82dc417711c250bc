package gobgp

import (
	"context"
	"errors"

	apiv4 "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"

	"github.com/aokeyd/aokeyd/bgp"
)

// APIv4Client is the part of gobgpd v4's gRPC API (service
// api.GoBgpService, module github.com/osrg/gobgp/v4) this package calls.
type APIv4Client interface {
	ListPeer(ctx context.Context, in *apiv4.ListPeerRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv4.ListPeerResponse], error)
	WatchEvent(ctx context.Context, in *apiv4.WatchEventRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv4.WatchEventResponse], error)
	ResetPeer(ctx context.Context, in *apiv4.ResetPeerRequest, opts ...grpc.CallOption) (*apiv4.ResetPeerResponse, error)
}

var _ APIv4Client = apiv4.GoBgpServiceClient(nil)

// NewV4 returns a Speaker using c, gobgpd v4's API.
func NewV4(c APIv4Client, opt Options) *Speaker { return newSpeaker(v4{c}, opt) }

// v4 is gobgpd v4's API: the same calls as v3's under other names (the
// service is api.GoBgpService, enum values carry their type's prefix).
type v4 struct{ c APIv4Client }

func (b v4) listPeer(ctx context.Context, address string) ([]bgp.PeerInfo, error) {
	st, err := b.c.ListPeer(ctx, &apiv4.ListPeerRequest{Address: address})
	if err != nil {
		return nil, err
	}
	return listAll(st.Recv, func(r *apiv4.ListPeerResponse) (bgp.PeerInfo, error) { return peerInfoV4(r.GetPeer()) })
}

func (b v4) resetPeer(ctx context.Context, address, communication string) error {
	_, err := b.c.ResetPeer(ctx, &apiv4.ResetPeerRequest{Address: address, Communication: communication})
	return err
}

func (b v4) watchPeers(ctx context.Context) (peerStream, error) {
	st, err := b.c.WatchEvent(ctx, &apiv4.WatchEventRequest{Peer: &apiv4.WatchEventRequest_Peer{}})
	if err != nil {
		return nil, err
	}
	return events[*apiv4.WatchEventResponse]{next: st.Recv, state: func(r *apiv4.WatchEventResponse) (bgp.PeerInfo, bool, error) {
		pe := r.GetPeer()
		if pe == nil || pe.GetType() != apiv4.WatchEventResponse_PeerEvent_TYPE_STATE {
			return bgp.PeerInfo{}, false, nil
		}
		p, err := peerInfoV4(pe.GetPeer())
		return p, true, err
	}}, nil
}

// peerInfoV4 converts a v4 peer as peerInfo does a v3 one.
func peerInfoV4(p *apiv4.Peer) (bgp.PeerInfo, error) {
	if p == nil {
		return bgp.PeerInfo{}, errors.New("peer without data")
	}
	st := p.GetState()
	return peerInfoOf(p.GetConf(), st, p.GetTransport(), sessionStateV4(st.GetSessionState()), adminStateV4(st.GetAdminState()), p.GetTimers().GetState())
}

func sessionStateV4(s apiv4.PeerState_SessionState) bgp.SessionState {
	switch s {
	case apiv4.PeerState_SESSION_STATE_IDLE:
		return bgp.StateIdle
	case apiv4.PeerState_SESSION_STATE_CONNECT:
		return bgp.StateConnect
	case apiv4.PeerState_SESSION_STATE_ACTIVE:
		return bgp.StateActive
	case apiv4.PeerState_SESSION_STATE_OPENSENT:
		return bgp.StateOpenSent
	case apiv4.PeerState_SESSION_STATE_OPENCONFIRM:
		return bgp.StateOpenConfirm
	case apiv4.PeerState_SESSION_STATE_ESTABLISHED:
		return bgp.StateEstablished
	}
	return bgp.StateUnknown
}

func adminStateV4(a apiv4.PeerState_AdminState) bgp.AdminState {
	switch a {
	case apiv4.PeerState_ADMIN_STATE_DOWN:
		return bgp.AdminDown
	case apiv4.PeerState_ADMIN_STATE_PFX_CT:
		return bgp.AdminPrefixLimit
	}
	return bgp.AdminUp
}
