package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/rotator"
)

// speakerPeer is the speaker's view of the one peer a status asks about
// ("ADDR" or "ADDR vrf NAME", an interface neighbour's "IFACE interface"
// or its interface alone, then " vrf NAME": peer.ParseArg), each asked
// about alone
// and waited for no longer than statusListWait: `aoctl status PEER` must
// not cost a listing of every neighbor (gobgpd answers one for hundreds of
// neighbors slowly). Without a VRF it asks once per VRF the daemon tracks
// the address in (the default VRF when it tracks it in none). A peer the
// speaker does not have is left out (the caller reports it not found); an
// error is a speaker that did not answer. Without a VRF an interface
// neighbour is asked about in each VRF the daemon tracks its interface in.
func (sv *statusView) speakerPeer(ctx context.Context, which string) ([]bgp.PeerInfo, error) {
	k, err := peer.ParseArg(which)
	if err != nil {
		return nil, nil // no such peer: every peer's key parses
	}
	vrfs := []string{k.VRF}
	if !strings.Contains(which, " vrf ") {
		vrfs = vrfs[:0]
		for _, p := range sv.table.peerList() {
			// The same address, or the same interface neighbour's
			// interface, in any VRF.
			if pk := p.info.Key(); pk.Addr == k.Addr && pk.Link == k.Link {
				vrfs = append(vrfs, p.info.VRF)
			}
		}
		if len(vrfs) == 0 {
			vrfs = []string{""}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, statusListWait)
	defer cancel()
	var out []bgp.PeerInfo
	for _, v := range vrfs {
		type answer struct {
			p   bgp.PeerInfo
			err error
		}
		ch := make(chan answer, 1)
		go func() {
			in := k
			in.VRF = v
			p, err := sv.o.Speaker.Peer(ctx, in)
			ch <- answer{p, err}
		}()
		var a answer
		select {
		case a = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer about neighbor %s within %s: %w", k.Name(), statusListWait, ctx.Err())
		}
		switch {
		case errors.Is(a.err, bgp.ErrNoPeer):
		case a.err != nil:
			return nil, a.err
		default:
			out = append(out, a.p)
		}
	}
	return out, nil
}

// rotationStatus is the rotation machines' status of the peers in infos:
// of every peer when peer is "" (one sorted copy of all), else of these
// alone, read one by one.
func (sv *statusView) rotationStatus(peer string, infos []bgp.PeerInfo) map[rotator.PeerID]rotator.Status {
	rot := map[rotator.PeerID]rotator.Status{}
	if peer == "" {
		for _, s := range sv.ctrl.Status() {
			rot[s.Peer] = s
		}
		return rot
	}
	for _, info := range infos {
		id := info.Key()
		if s, ok := sv.ctrl.StatusOf(id); ok {
			rot[id] = s
		}
	}
	return rot
}

// namedBy reports whether a status query's peer arg names info: its key's
// text, its address, or an interface neighbour's interface alone
// (peer.ParseArg), in its VRF or, without one, in any.
func namedBy(info bgp.PeerInfo, arg string) bool {
	if arg == info.Key().String() || arg == info.Neighbor.String() {
		return true
	}
	k, err := peer.ParseArg(arg)
	if err != nil || !k.IsLink() || k.Link != info.Link {
		return false
	}
	return k.VRF == info.VRF || !strings.Contains(arg, " vrf ")
}
