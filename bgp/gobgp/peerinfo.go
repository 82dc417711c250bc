package gobgp

import (
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aokeyd/aokeyd/bgp"
)

// The getters of a neighbor's configuration, state and transport that v3
// and v4 messages share (same names and types; a nil message answers
// zero values), so that one conversion serves both API lines.
type (
	peerConf interface {
		GetNeighborAddress() string
		GetVrf() string
		GetAuthPassword() string
		GetPeerAsn() uint32
	}
	peerState interface {
		GetNeighborAddress() string
		GetAuthPassword() string
		GetFlops() uint32
	}
	peerTransport interface {
		GetLocalPort() uint32
		GetRemotePort() uint32
		GetPassiveMode() bool
		GetLocalAddress() string
	}
)

// peerInfoOf converts one neighbor; the auth password (TCP-MD5) only sets
// PeerInfo.MD5 and is not kept.
func peerInfoOf(conf peerConf, state peerState, tr peerTransport, ss bgp.SessionState, as bgp.AdminState, uptime *timestamppb.Timestamp) (bgp.PeerInfo, error) {
	addr := conf.GetNeighborAddress()
	if addr == "" {
		addr = state.GetNeighborAddress()
	}
	n, err := netip.ParseAddr(addr)
	if err != nil {
		return bgp.PeerInfo{}, fmt.Errorf("neighbor_address %q: %w", addr, err)
	}
	info := bgp.PeerInfo{
		Neighbor:   n.Unmap(),
		VRF:        conf.GetVrf(),
		LocalPort:  uint16(tr.GetLocalPort()),
		RemotePort: uint16(tr.GetRemotePort()),
		State:      ss,
		Admin:      as,
		Flops:      state.GetFlops(),
		Passive:    tr.GetPassiveMode(),
		MD5:        conf.GetAuthPassword() != "" || state.GetAuthPassword() != "",
		PeerASN:    conf.GetPeerAsn(),
	}
	if la, err := netip.ParseAddr(tr.GetLocalAddress()); err == nil && !la.IsUnspecified() {
		info.Local = la.Unmap()
	}
	if uptime != nil && (uptime.GetSeconds() != 0 || uptime.GetNanos() != 0) {
		info.Uptime = uptime.AsTime()
	}
	return info, nil
}
