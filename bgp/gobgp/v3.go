package gobgp

import (
	"context"
	"errors"

	api "github.com/osrg/gobgp/v3/api"

	"github.com/aokeyd/aokeyd/bgp"
)

// v3 is gobgpd v3's API (service apipb.GobgpApi).
type v3 struct{ c API }

func (b v3) listPeer(ctx context.Context, address string) ([]bgp.PeerInfo, error) {
	st, err := b.c.ListPeer(ctx, &api.ListPeerRequest{Address: address})
	if err != nil {
		return nil, err
	}
	return listAll(st.Recv, func(r *api.ListPeerResponse) (bgp.PeerInfo, error) { return peerInfo(r.GetPeer()) })
}

func (b v3) resetPeer(ctx context.Context, address, communication string) error {
	_, err := b.c.ResetPeer(ctx, &api.ResetPeerRequest{Address: address, Communication: communication})
	return err
}

func (b v3) watchPeers(ctx context.Context) (peerStream, error) {
	st, err := b.c.WatchEvent(ctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}})
	if err != nil {
		return nil, err
	}
	return events[*api.WatchEventResponse]{next: st.Recv, state: func(r *api.WatchEventResponse) (bgp.PeerInfo, bool, error) {
		pe := r.GetPeer()
		if pe == nil || pe.GetType() != api.WatchEventResponse_PeerEvent_STATE {
			return bgp.PeerInfo{}, false, nil
		}
		p, err := peerInfo(pe.GetPeer())
		return p, true, err
	}}, nil
}

// peerInfo converts GoBGP's peer; the auth password only sets MD5.
func peerInfo(p *api.Peer) (bgp.PeerInfo, error) {
	if p == nil {
		return bgp.PeerInfo{}, errors.New("peer without data")
	}
	st := p.GetState()
	return peerInfoOf(p.GetConf(), st, p.GetTransport(), sessionState(st.GetSessionState()), adminState(st.GetAdminState()), p.GetTimers().GetState())
}

func sessionState(s api.PeerState_SessionState) bgp.SessionState {
	switch s {
	case api.PeerState_IDLE:
		return bgp.StateIdle
	case api.PeerState_CONNECT:
		return bgp.StateConnect
	case api.PeerState_ACTIVE:
		return bgp.StateActive
	case api.PeerState_OPENSENT:
		return bgp.StateOpenSent
	case api.PeerState_OPENCONFIRM:
		return bgp.StateOpenConfirm
	case api.PeerState_ESTABLISHED:
		return bgp.StateEstablished
	}
	return bgp.StateUnknown
}

func adminState(a api.PeerState_AdminState) bgp.AdminState {
	switch a {
	case api.PeerState_DOWN:
		return bgp.AdminDown
	case api.PeerState_PFX_CT:
		return bgp.AdminPrefixLimit
	}
	return bgp.AdminUp
}
