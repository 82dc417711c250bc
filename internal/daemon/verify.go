package daemon

import (
	"context"
	"net/netip"
	"sync"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
)

// A roll to a key whose tcp_options differ from the peer's completes
// hitlessly (Linux signs established segments that carry no other TCP
// option the same way either way), and the next reconnect fails: the SYN's
// options are hashed differently. The session is down then, and the only
// trace is on the listener: its key for the peer counts every failing
// segment. This file reads those counters for `aoctl status` and the
// metrics, and decides when a peer's segments fail verification.

// listenerObs is one listening socket's TCP-AO state.
type listenerObs struct {
	name string
	obs  rotator.Observed
}

// observeListeners reads every listening socket of the speaker that has
// TCP-AO. Errors leave a socket out: status is best effort.
func (d *Daemon) observeListeners(ctx context.Context) []listenerObs {
	hs, err := d.tracker.Listeners(ctx)
	if err != nil {
		return nil
	}
	return d.observeListenersOf(hs)
}

// observeListenersOf reads the listeners hs (found by the caller).
func (d *Daemon) observeListenersOf(hs []bgp.SocketHandle) []listenerObs {
	var out []listenerObs
	for _, h := range hs {
		o, err := rotator.Observe(d.o.SocketOf(h), rotator.ReadBare)
		if err != nil || !o.HaveAO {
			continue
		}
		out = append(out, listenerObs{name: "listen " + h.Ref().Local.String(), obs: o})
	}
	return out
}

// listenerFor collects the listener counters for peer addr (VRF ifindex
// idx): every key whose prefix covers addr, marked Shared when its prefix
// also covers one of others (the speaker's other peers). bad is the sum of
// pkt_bad over the unshared keys: what the kernel lets us attribute to this
// peer alone.
func listenerFor(ls []listenerObs, addr netip.Addr, idx int, others []netip.Addr) (lc control.ListenerCounters, bad uint64) {
	addr = addr.Unmap()
	lc.Keys = []control.ListenerKey{}
	for _, l := range ls {
		in := l.obs.Info
		lc.PktBad += in.PktBad
		lc.PktKeyNotFound += in.PktKeyNotFound
		lc.PktAORequired += in.PktAORequired
		lc.PktDroppedICMP += in.PktDroppedICMP
		for _, k := range l.obs.Keys {
			p := k.Peer
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			if !p.Contains(addr) || (k.IfIndex != 0 && k.IfIndex != idx) {
				continue
			}
			shared := false
			for _, o := range others {
				if o = o.Unmap(); o != addr && p.Contains(o) {
					shared = true
					break
				}
			}
			lc.Keys = append(lc.Keys, control.ListenerKey{Socket: l.name, Prefix: p.String(), SendID: k.SendID, RecvID: k.RecvID,
				TCPOptions: control.TCPOptions(k.ExcludeOptions), PktGood: k.PktGood, PktBad: k.PktBad, Shared: shared})
			if !shared {
				bad += k.PktBad
			}
		}
	}
	return lc, bad
}

// verifyBase remembers, per peer, the attributable listener pkt_bad when
// its session went down (or when aokeyd first saw it down): failures are
// the ones counted since.
type verifyBase struct {
	mu   sync.Mutex
	base map[rotator.PeerID]uint64
}

// failing reports whether peer id's segments fail verification on the
// listener: its session is down and its attributable pkt_bad grew since the
// base. While the session is up it only forgets the base.
func (v *verifyBase) failing(id rotator.PeerID, up bool, bad uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if up {
		delete(v.base, id)
		return false
	}
	b, ok := v.base[id]
	if !ok {
		if v.base == nil {
			v.base = map[rotator.PeerID]uint64{}
		}
		v.base[id] = bad
		return false
	}
	return bad > b
}

// noteDown records the base for a peer whose session just went down.
func (v *verifyBase) noteDown(id rotator.PeerID, bad uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.base == nil {
		v.base = map[rotator.PeerID]uint64{}
	}
	v.base[id] = bad
}

// forget drops a peer's base.
func (v *verifyBase) forget(id rotator.PeerID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.base, id)
}

// peerAddrs is every known peer's address (for Shared).
func (d *Daemon) peerAddrs() []netip.Addr {
	var out []netip.Addr
	for _, p := range d.peerList() {
		out = append(out, p.info.Neighbor)
	}
	return out
}

// verifyViewer reads the listeners once for a status report and returns
// what fills each peer's Listener and adds the warning when its segments
// fail verification. infos are the speaker's peers; with one (a status of
// one peer: infos hold it alone) the other peers are the ones the daemon
// tracks, so that no other peer is asked about.
func (d *Daemon) verifyViewer(hs []bgp.SocketHandle, infos []bgp.PeerInfo, one bool) func(control.PeerStatus, bgp.PeerInfo) control.PeerStatus {
	ls := d.observeListenersOf(hs)
	var others []netip.Addr
	if one {
		for _, p := range d.peerList() {
			if d.managed(p.info) {
				others = append(others, p.info.Neighbor)
			}
		}
	}
	for _, info := range infos {
		if d.managed(info) {
			others = append(others, info.Neighbor)
		}
	}
	return func(ps control.PeerStatus, info bgp.PeerInfo) control.PeerStatus {
		idx, _ := ifIndex(info.VRF)
		lc, bad := listenerFor(ls, info.Neighbor, idx, others)
		lc.VerifyFailing = d.view.verify.failing(info.Key(), info.Established(), bad)
		ps.Listener = &lc
		if lc.VerifyFailing {
			ps.Warnings = append(ps.Warnings, control.WarnVerifyFailing(info.Neighbor.String()))
		}
		return ps
	}
}

// noteDown records peer info's base from the listeners as its session
// goes down.
func (d *Daemon) noteDown(ctx context.Context, info bgp.PeerInfo) {
	idx, _ := ifIndex(info.VRF)
	_, bad := listenerFor(d.observeListeners(ctx), info.Neighbor, idx, d.peerAddrs())
	d.view.verify.noteDown(info.Key(), bad)
}

// observeVerify publishes each managed peer's verify-failing gauge (a
// metrics scrape). The listeners are read only when a session is down.
func (d *Daemon) observeVerify(m *metrics.Metrics) {
	peers := d.peerList()
	var ls []listenerObs
	others := make([]netip.Addr, 0, len(peers))
	for _, p := range peers {
		others = append(others, p.info.Neighbor)
		if !p.info.Established() && ls == nil {
			ls = d.observeListeners(context.Background())
		}
	}
	for _, p := range peers {
		if e := d.view.scraped[p]; e != nil && e.verifySet && !e.verify && p.info.Established() {
			// Published not failing for this very state: an established
			// session stays so (no policy lookup per scrape).
			e.pass = d.view.scrapes
			continue
		}
		if !d.managed(p.info) {
			continue
		}
		failing := false
		if !p.info.Established() {
			idx, _ := ifIndex(p.info.VRF)
			_, bad := listenerFor(ls, p.info.Neighbor, idx, others)
			failing = d.view.verify.failing(p.id, false, bad)
		}
		if e := d.scrapedFor(p); !e.verifySet || e.verify != failing {
			m.SetVerifyFailing(e.mp, failing)
			e.verifySet, e.verify = true, failing
		}
	}
}
