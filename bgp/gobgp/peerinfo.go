package gobgp

import (
	"errors"
	"fmt"
	"io"
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
		GetDescription() string
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
	peerTimers interface {
		GetUptime() *timestamppb.Timestamp
		GetDowntime() *timestamppb.Timestamp
	}
)

// peerInfoOf converts one neighbor; the auth password (TCP-MD5) only sets
// PeerInfo.MD5 and is not kept.
func peerInfoOf(conf peerConf, state peerState, tr peerTransport, ss bgp.SessionState, as bgp.AdminState, timers peerTimers) (bgp.PeerInfo, error) {
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
	if up := timers.GetUptime(); set(up) {
		info.Uptime = up.AsTime()
	}
	// GoBGP reports when the session last went down, not why.
	var about bgp.PeerAbout
	about.Description = conf.GetDescription()
	if down := timers.GetDowntime(); set(down) {
		about.LastDown = down.AsTime()
	}
	if about != (bgp.PeerAbout{}) {
		info.About = &about
	}
	return info, nil
}

// set reports whether GoBGP set t (it reports zero for never).
func set(t *timestamppb.Timestamp) bool {
	return t != nil && (t.GetSeconds() != 0 || t.GetNanos() != 0)
}

// listAll drains a ListPeer stream of either API line: recv is the
// stream's Recv, peer converts one response's neighbor.
func listAll[R any](recv func() (R, error), peer func(R) (bgp.PeerInfo, error)) ([]bgp.PeerInfo, error) {
	var out []bgp.PeerInfo
	for {
		r, err := recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p, err := peer(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
}

// events is a WatchEvent stream of either API line as a peerStream: next
// is the stream's Recv; state answers a response's neighbor when it is a
// peer state event (ok false: another event), converted.
type events[R any] struct {
	next  func() (R, error)
	state func(R) (p bgp.PeerInfo, ok bool, err error)
}

func (e events[R]) recv() (bgp.PeerInfo, bool, error) {
	r, err := e.next()
	if err != nil {
		return bgp.PeerInfo{}, false, err
	}
	p, ok, err := e.state(r)
	if !ok {
		return bgp.PeerInfo{}, true, nil
	}
	if err != nil {
		return bgp.PeerInfo{}, true, fmt.Errorf("peer event: %w", err)
	}
	return p, false, nil
}
