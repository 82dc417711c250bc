package gobgp

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	var out []bgp.PeerInfo
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p, err := peerInfo(r.GetPeer())
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
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
	return v3Stream{st}, nil
}

type v3Stream struct{ st api.GobgpApi_WatchEventClient }

func (s v3Stream) recv() (bgp.PeerInfo, bool, error) {
	r, err := s.st.Recv()
	if err != nil {
		return bgp.PeerInfo{}, false, err
	}
	pe := r.GetPeer()
	if pe == nil || pe.GetType() != api.WatchEventResponse_PeerEvent_STATE {
		return bgp.PeerInfo{}, true, nil
	}
	p, err := peerInfo(pe.GetPeer())
	if err != nil {
		return bgp.PeerInfo{}, true, fmt.Errorf("peer event: %w", err)
	}
	return p, false, nil
}

// peerInfo converts GoBGP's peer; the auth password only sets MD5.
func peerInfo(p *api.Peer) (bgp.PeerInfo, error) {
	if p == nil {
		return bgp.PeerInfo{}, errors.New("peer without data")
	}
	st := p.GetState()
	return peerInfoOf(p.GetConf(), st, p.GetTransport(), sessionState(st.GetSessionState()), adminState(st.GetAdminState()), p.GetTimers().GetState().GetUptime())
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
