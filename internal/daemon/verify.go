package daemon

import (
	"context"
	"net/netip"
	"sync"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/refit"
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
func (sv *statusView) observeListeners(ctx context.Context) []listenerObs {
	hs, err := sv.tracker.Listeners(ctx)
	if err != nil {
		return nil
	}
	return sv.observeListenersOf(hs)
}

// observeListenersOf reads the listeners hs (found by the caller).
func (sv *statusView) observeListenersOf(hs []bgp.SocketHandle) []listenerObs {
	var out []listenerObs
	for _, h := range hs {
		o, err := rotator.Observe(sv.o.SocketOf(h), rotator.ReadBare)
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

// verifyCounts are the listener counters a down peer's failures are
// told by: bad is the attributable pkt_bad (its unshared keys: bad MAC),
// notFound the listeners' pkt_key_not_found (every peer's: a KeyID no key
// matched).
type verifyCounts struct{ bad, notFound uint64 }

// verifyCause is why a down peer's segments fail on the listener.
type verifyCause uint8

const (
	verifyOK          verifyCause = iota
	verifyBadMAC                  // a key with the KeyID is there, the MAC does not match
	verifyKeyNotFound             // no key matches the KeyID
)

// verifyBase remembers, per peer, the listener counters when its session
// went down, or when aokeyd started managing it while down (its first
// contact): failures are the ones counted since.
//
// Every peer is down at the start, before the sessions come up: the map
// grows to the fleet (4,096 peers: 0.6 MiB) and a Go map keeps the
// buckets of its largest size. Invariant: peak is at least len(base) and
// at most what base held since it was made; a delete that leaves base
// under a quarter of peak makes it afresh at its size (nil when empty).
type verifyBase struct {
	mu   sync.Mutex
	base map[rotator.PeerID]verifyCounts
	peak int
}

// failing says why peer id's segments fail on the listener: its session is
// down and a counter grew since the base (a bad MAC on its own keys first;
// else a KeyID no key matched, when it is the only peer down, alone).
// While the session is up it only forgets the base; a peer without one
// gets it now.
func (v *verifyBase) failing(id rotator.PeerID, up bool, c verifyCounts, aloneDown bool) verifyCause {
	v.mu.Lock()
	defer v.mu.Unlock()
	if up {
		v.deleteLocked(id)
		return verifyOK
	}
	b, ok := v.base[id]
	switch {
	case !ok:
		v.setLocked(id, c)
	case c.bad > b.bad:
		return verifyBadMAC
	case aloneDown && c.notFound > b.notFound:
		return verifyKeyNotFound
	}
	return verifyOK
}

func (v *verifyBase) setLocked(id rotator.PeerID, c verifyCounts) {
	if v.base == nil {
		v.base = map[rotator.PeerID]verifyCounts{}
	}
	v.base[id] = c
	v.peak = max(v.peak, len(v.base))
}

// deleteLocked drops id's base, and the buckets of a size base no longer
// has (verifyBase).
func (v *verifyBase) deleteLocked(id rotator.PeerID) {
	if _, ok := v.base[id]; !ok {
		return
	}
	delete(v.base, id)
	switch n := len(v.base); {
	case n == 0:
		v.base, v.peak = nil, 0
	case n < v.peak/4:
		v.base, v.peak = refit.Map(v.base), n
	}
}

// noteDown records the base for a peer whose session just went down.
func (v *verifyBase) noteDown(id rotator.PeerID, c verifyCounts) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setLocked(id, c)
}

// noteFirst records the base of a peer that has none (first contact).
func (v *verifyBase) noteFirst(id rotator.PeerID, c verifyCounts) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.base[id]; !ok {
		v.setLocked(id, c)
	}
}

// has reports whether peer id has a base.
func (v *verifyBase) has(id rotator.PeerID) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.base[id]
	return ok
}

// forget drops a peer's base.
func (v *verifyBase) forget(id rotator.PeerID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deleteLocked(id)
}

// noteFirstContact takes the base of every peer the policy binds by
// address whose session is not up and that has none (a new peering, or
// aokeyd's start), from the listeners as they are before the pass's
// listener sync: a key the sync is about to install counts from 0, so the
// first failing SYN after it warns at the first look. (A binding of a
// prefix of peers names no address: such a peer gets its base at the
// first status.) The listeners are read only when such a peer exists.
func (sv *statusView) noteFirstContact(ctx context.Context) {
	var need []bgp.PeerInfo
	for _, info := range sv.notUp() {
		if !sv.verify.has(info.Key()) {
			need = append(need, info)
		}
	}
	if len(need) == 0 {
		return
	}
	ls, others := sv.observeListeners(ctx), sv.peerAddrs()
	for _, info := range need {
		sv.verify.noteFirst(info.Key(), countsFor(ls, info, others))
	}
}

// notUp are the peers the policy binds by address whose session is not up
// (as the speaker's events reported them: never up, or down since).
func (sv *statusView) notUp() []bgp.PeerInfo {
	var out []bgp.PeerInfo
	sv.table.read(func(peers map[rotator.PeerID]*peerState) {
		sv.policy().ForEachHost(func(addr netip.Addr, vrf string) {
			info := bgp.PeerInfo{Neighbor: addr, VRF: vrf}
			if p := peers[info.Key()]; p != nil && p.handle != nil {
				return
			}
			out = append(out, info)
		})
	})
	return out
}

// countsFor is listenerFor's verifyCounts for the peer info.
func countsFor(ls []listenerObs, info bgp.PeerInfo, others []netip.Addr) verifyCounts {
	idx, _ := ifIndex(info.VRF)
	lc, bad := listenerFor(ls, info.Neighbor, idx, others)
	return verifyCounts{bad: bad, notFound: lc.PktKeyNotFound}
}

// aloneDown reports whether at most one peer may be down (notUp are the
// peers bound by address that are not up): what lets the listeners'
// shared key-not-found counter be one peer's. A binding of a prefix of
// peers may hide down peers, so with one it is never alone.
func (sv *statusView) aloneDown(notUp []bgp.PeerInfo) bool {
	if sv.policy().HasPrefixBinding() {
		return false
	}
	return len(notUp) <= 1
}

// peerAddrs is every known peer's address (for Shared).
func (sv *statusView) peerAddrs() []netip.Addr {
	var out []netip.Addr
	for _, p := range sv.table.peerList() {
		out = append(out, p.info.Neighbor)
	}
	return out
}

// verifyViewer reads the listeners once for a status report and returns
// what fills each peer's Listener and adds the warning when its segments
// fail verification. infos are the speaker's peers; with one (a status of
// one peer: infos hold it alone) the other peers are the ones the daemon
// tracks, so that no other peer is asked about.
func (sv *statusView) verifyViewer(hs []bgp.SocketHandle, infos []bgp.PeerInfo, one bool) func(control.PeerStatus, bgp.PeerInfo) control.PeerStatus {
	ls := sv.observeListenersOf(hs)
	var others []netip.Addr
	if one {
		for _, p := range sv.table.peerList() {
			if sv.managed(*p.info) {
				others = append(others, p.info.Neighbor)
			}
		}
	}
	for _, info := range infos {
		if sv.managed(info) {
			others = append(others, info.Neighbor)
		}
	}
	alone := sv.aloneDown(sv.notUp())
	return func(ps control.PeerStatus, info bgp.PeerInfo) control.PeerStatus {
		idx, _ := ifIndex(info.VRF)
		lc, bad := listenerFor(ls, info.Neighbor, idx, others)
		switch sv.verify.failing(info.Key(), info.Established(), verifyCounts{bad, lc.PktKeyNotFound}, alone) {
		case verifyBadMAC:
			lc.VerifyFailing = true
			ps.Warnings = append(ps.Warnings, control.WarnVerifyFailing(info.Neighbor.String()))
		case verifyKeyNotFound:
			lc.KeyNotFound = true
			ps.Warnings = append(ps.Warnings, control.WarnKeyNotFound(info.Neighbor.String()))
		}
		ps.Listener = &lc
		return ps
	}
}

// noteDown records peer info's base from the listeners as its session
// goes down.
func (sv *statusView) noteDown(ctx context.Context, info bgp.PeerInfo) {
	sv.verify.noteDown(info.Key(), countsFor(sv.observeListeners(ctx), info, sv.peerAddrs()))
}

// observeVerify publishes each managed peer's verify-failing gauge (a
// metrics scrape). The listeners are read only when a session is down.
func (sv *statusView) observeVerify(m *metrics.Metrics) {
	peers := sv.table.peerList()
	// The peers bound by address that were never up have no peer state:
	// their first contact is published too.
	var contact []bgp.PeerInfo
	notUp := sv.notUp()
	for _, info := range notUp {
		if sv.table.peer(info.Key()) == nil {
			contact = append(contact, info)
		}
	}
	alone := sv.aloneDown(notUp)
	var ls []listenerObs
	others := make([]netip.Addr, 0, len(peers))
	for _, p := range peers {
		others = append(others, p.info.Neighbor)
		if !p.info.Established() && ls == nil {
			ls = sv.observeListeners(context.Background())
		}
	}
	if len(contact) > 0 && ls == nil {
		ls = sv.observeListeners(context.Background())
	}
	for _, p := range peers {
		if e := sv.scraped[p]; e != nil && e.verifySet && e.verify == verifyOK && p.info.Established() {
			// Published not failing for this very state: an established
			// session stays so (no policy lookup per scrape).
			e.pass = sv.scrapes
			continue
		}
		if !sv.managed(*p.info) {
			continue
		}
		cause := verifyOK
		if !p.info.Established() {
			cause = sv.verify.failing(p.id, false, countsFor(ls, *p.info, others), alone)
		}
		if e := sv.scrapedFor(p); !e.verifySet || e.verify != cause {
			m.SetVerifyFailing(e.mp, cause == verifyBadMAC)
			m.SetKeyNotFound(e.mp, cause == verifyKeyNotFound)
			e.verifySet, e.verify = true, cause
		}
	}
	seen := make(map[rotator.PeerID]bool, len(contact))
	for _, info := range contact {
		id := info.Key()
		seen[id] = true
		cause := sv.verify.failing(id, false, countsFor(ls, info, others), alone)
		m.SetVerifyFailing(metricPeer(id), cause == verifyBadMAC)
		m.SetKeyNotFound(metricPeer(id), cause == verifyKeyNotFound)
	}
	for id := range sv.contact {
		if !seen[id] && sv.table.peer(id) == nil {
			m.DeletePeer(metricPeer(id)) // its binding went
		}
	}
	sv.contact = seen
}
