package frr

import (
	"context"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
)

// Watch implements bgp.Speaker by polling `show bgp vrf all neighbors json`
// every PollInterval: an EventSync with the first good listing (and the
// first after a failed one, which is an EventLost), then an EventState for
// each neighbor whose session changed (state, uptime, flops, ports, admin
// state, an interface neighbour's learned address) between two listings. A change that comes and goes within one
// interval (a session dropping and coming back) still shows: FRR's
// connection count and uptime differ.
func (s *Speaker) Watch(ctx context.Context) (<-chan bgp.Event, error) {
	ch := make(chan bgp.Event, 16)
	go s.watch(ctx, ch)
	return ch, nil
}

func (s *Speaker) watch(ctx context.Context, ch chan<- bgp.Event) {
	defer close(ch)
	var last map[peerkey.Key]bgp.PeerInfo // nil: not synced
	t := time.NewTicker(s.opt.PollInterval)
	defer t.Stop()
	for {
		ps, err := s.Peers(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.opt.Log.Warn("FRR neighbor poll failed", "speaker", s.opt.Name, "err", err)
			if last != nil {
				last = nil
				if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventLost}) {
					return
				}
			}
		case last == nil:
			last = index(ps)
			if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventSync, Peers: ps}) {
				return
			}
		default:
			cur := index(ps)
			for _, p := range ps {
				if old, ok := last[keyOf(p)]; ok && !changed(old, p) {
					continue
				}
				if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventState, Peer: p}) {
					return
				}
			}
			// A neighbor removed from FRR's configuration: the session is
			// gone (its state as FRR last reported it, marked Idle).
			for k, old := range last {
				if _, ok := cur[k]; !ok && old.Established() {
					old.State = bgp.StateIdle
					if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventState, Peer: old}) {
						return
					}
				}
			}
			last = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// keyOf is the peer's identity (peer.Key): an interface neighbour's is
// its interface, not the address it learned, which may change or be
// none (two such neighbours would be one).
func keyOf(p bgp.PeerInfo) peerkey.Key { return p.Key() }

func index(ps []bgp.PeerInfo) map[peerkey.Key]bgp.PeerInfo {
	m := make(map[peerkey.Key]bgp.PeerInfo, len(ps))
	for _, p := range ps {
		m[keyOf(p)] = p
	}
	return m
}

// changed reports whether b is another session state than a: an
// interface neighbour's learned address included.
func changed(a, b bgp.PeerInfo) bool {
	return a.State != b.State || a.Neighbor != b.Neighbor || !a.Uptime.Equal(b.Uptime) || a.Flops != b.Flops ||
		a.LocalPort != b.LocalPort || a.RemotePort != b.RemotePort || a.Admin != b.Admin || a.MD5 != b.MD5
}
