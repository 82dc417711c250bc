package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// Interface neighbours on the listeners (issue 53, item 2). An interface
// neighbour (FRR's `neighbor swp1 interface`) peers from the address it
// learned on its link, which the speaker reports before the session comes
// up (bgp.Tracker.LinkPeers): the listeners hold a host key for each
// learned address of a neighbour a neighbor_interface binding binds, as
// they do for a binding's address, so that its session comes up signed.
//
// TCP-AO keys carry no zone and match their address on every link
// (docs/kernel.md): one learned address in one VRF is one listener key,
// whichever link it was learned on. Two neighbours that learned one
// address in one VRF share it when their bindings name one chain (the
// same keys); when they name two, the kernel cannot tell their SYNs apart
// and the second in key order is refused, with a status warning naming
// both (linkWarnings); the first is the one that held the address at the
// last recompute, else the first in key order, so that a newcomer never
// takes a held address's keys. An address an address binding covers is that
// binding's on the listener: the interface neighbour's keys are not added
// beside it (two keys of one address sharing an ID would be refused).
//
// Its sessions are managed as any peer's (core.bindingOf): the keys it
// desires are its link binding's for the address it learned. Not yet: an
// address a neighbour no longer peers from leaves the listener at the
// next recompute, not after a grace.

// desiredOf is peerDesired for the peer info reports: an interface
// neighbour's keys are its link binding's for the address it learned,
// with the revocations scoped to the neighbour (its link, not the
// address, which may change).
func (rc *reconciler) desiredOf(pol *policy.Policy, snap *keystore.Snapshot, info bgp.PeerInfo, now time.Time) (policy.PeerKeys, error) {
	if !info.Link.IsValid() {
		return rc.peerDesired(pol, snap, info.Neighbor, info.VRF, now)
	}
	pk, err := pol.DesiredOnLink(snap, info.Link.Name(), info.Neighbor, info.VRF, now)
	if err == nil {
		rc.revs.Scope(&pk, info.Key())
	}
	return pk, err
}

// linkWarn is the last recompute's warnings about interface neighbours,
// and which neighbour each shared address was keyed for.
type linkWarn struct {
	w atomic.Pointer[[]string]
	// held is the neighbour each learned address was keyed for by the last
	// recompute: it keeps the address at the next one, so that a
	// neighbour that learns an address another one's chain holds is the
	// one refused, whatever their order (the reconcile goroutine's alone).
	held map[addrIn]peer.Key
	// refused is the last recompute's neighbours refused the address they
	// learned (another link's neighbour holds it with another chain), with
	// that address: their sessions are not managed (core.bindingOf).
	refused atomic.Pointer[map[peer.Key]netip.Addr]
}

// addrIn is a learned address in a VRF: one listener key.
type addrIn struct {
	addr netip.Addr
	vrf  string
}

func (l *linkWarn) set(w []string) { l.w.Store(&w) }

// linkRefused reports whether the last recompute refused the interface
// neighbour k the address addr (see linkWarn.refused).
func (rc *reconciler) linkRefused(k peer.Key, addr netip.Addr) bool {
	m := rc.links.refused.Load()
	if m == nil {
		return false
	}
	a, ok := (*m)[k]
	return ok && a == addr.Unmap().WithZone("")
}

// warnings is what status shows.
func (l *linkWarn) warnings() []string {
	if w := l.w.Load(); w != nil {
		return *w
	}
	return nil
}

// linkHolder is the interface neighbour whose keys a learned address got
// on the listener, with its binding's chain.
type linkHolder struct {
	p     bgp.PeerInfo
	chain string
}

// linkListenerDesired adds to v4 and v6 the listener keys of the addresses
// the interface neighbours links learned (bgp.Tracker.LinkPeers), as
// listenerDesired does for a binding; it returns the warnings for status
// besides.
func (rc *reconciler) linkListenerDesired(pol *policy.Policy, snap *keystore.Snapshot, now time.Time, links []bgp.PeerInfo, v4, v6 *rotator.Desired) (next time.Time, incomplete bool, frozen []frozenRange, warnings []string) {
	// The neighbours that held their address at the last recompute first:
	// a newcomer to a held address is the second.
	before := rc.links.held
	links = slices.Clone(links)
	slices.SortStableFunc(links, func(a, b bgp.PeerInfo) int {
		ha := before[addrIn{a.Neighbor.WithZone(""), a.VRF}] == a.Key()
		hb := before[addrIn{b.Neighbor.WithZone(""), b.VRF}] == b.Key()
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	held := map[addrIn]linkHolder{}
	refused := map[peer.Key]netip.Addr{}
	defer func() {
		rc.links.held = map[addrIn]peer.Key{}
		for at, h := range held {
			rc.links.held[at] = h.p.Key()
		}
		rc.links.refused.Store(&refused)
	}()
	for _, p := range links {
		if !p.Neighbor.IsValid() {
			continue // nothing learned yet
		}
		name := p.Link.Name()
		b, err := pol.BindingForLink(name, p.VRF)
		if err != nil {
			continue // not bound: not aokeyd's
		}
		addr := p.Neighbor.Unmap().WithZone("")
		if ab, err := pol.BindingFor(addr, p.VRF); err == nil {
			warnings = append(warnings, fmt.Sprintf("interface neighbour %s: the address it learned is bound by %s (%s): that binding's keys are on the listener, not those of %s (%s)",
				p.Shown(), ab, ab.Field, b, b.Field))
			continue
		}
		at := addrIn{addr, p.VRF}
		if h, ok := held[at]; ok {
			if h.chain != b.KeyChain {
				warnings = append(warnings, fmt.Sprintf("interface neighbours %s and %s learned one address%s with different key chains (%s, %s): the kernel's keys carry no link and cannot tell their sessions apart; %s is not keyed on the listener (bind both links to one chain)",
					h.p.Shown(), p.Shown(), vrfSuffix(p.VRF), h.chain, b.KeyChain, p.Link.Name()))
				refused[p.Key()] = addr
			}
			continue // one key serves both: keys carry no zone
		}
		held[at] = linkHolder{p, b.KeyChain}
		prefix := hostPrefix(addr)
		fb := b
		fb.Neighbor = prefix                       // the range a freeze keeps
		pk, err := rc.desiredOf(pol, snap, p, now) // a revocation scoped to the neighbour's link
		if err != nil {
			rc.log.Warn("no desired keys for interface neighbour", "peer", p.Key().Shown(addr), "err", err)
			incomplete = true
			frozen = freeze(frozen, fb, err)
			continue
		}
		if snap.Degraded(pk.SourceChain) {
			frozen = freeze(frozen, fb, errFrozen)
		}
		next = sooner(next, pk.NextChange)
		idx, err := ifIndex(p.VRF)
		if err != nil {
			rc.log.Warn("interface neighbour's VRF not found", "peer", p.Key().Shown(addr), "err", err)
			incomplete = true
			frozen = freeze(frozen, fb, err)
			continue
		}
		dst := v6
		if addr.Is4() {
			dst = v4 // an IPv4 /30 or /31's far end
		}
		one := desired.Socket(pk, snap, prefix, idx, -1, "", rotator.Listening)
		dst.Keys = append(dst.Keys, one.Keys...)
		dst.Revoked = append(dst.Revoked, one.Revoked...)
		dst.Replace = append(dst.Replace, rc.owns.approvedRefs(pk, prefix, idx)...)
	}
	return next, incomplete, frozen, warnings
}

func vrfSuffix(vrf string) string {
	if vrf == "" {
		return ""
	}
	return " in vrf " + vrf
}

// linkEntries adds to inChain the listener entries of the addresses the
// interface neighbours learned whose binding reads the key source's chain
// (the last recompute's; a revoke's listener part). Reconcile goroutine.
func (rc *reconciler) linkEntries(chain string, inChain map[listenerEntry]bool) {
	pol := rc.policy()
	for at, k := range rc.links.held {
		if !readsChain(pol, k, chain) {
			continue
		}
		if idx, err := ifIndex(at.vrf); err == nil {
			inChain[listenerEntry{hostPrefix(at.addr), idx}] = true
		}
	}
}

// learnedAddr is the address the interface neighbour k learned, as the
// speaker last reported it (invalid before one).
func (rc *reconciler) learnedAddr(k peer.Key) netip.Addr {
	for _, p := range rc.tracker.LinkPeers() {
		if p.Key() == k {
			return p.Neighbor.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

// linkWarnings is the last recompute's warnings about interface
// neighbours, for status.
func (rc *reconciler) linkWarnings() []string { return rc.links.warnings() }

// unmanagedErr is status's answer about the peer arg names, which aokeyd
// does not manage: no binding, or an interface neighbour a
// neighbor_interface binding binds whose session aokeyd does not key
// (core.bindingOf says why).
func unmanagedErr(co *core, info bgp.PeerInfo, arg string) error {
	if info.Link.IsValid() {
		if _, err := co.policy().BindingForKey(info.Key()); err == nil {
			_, why := co.bindingOf(info)
			return fmt.Errorf("peer %s: its session is not managed (%v): %w", info.Shown(), why, control.ErrNotFound)
		}
	}
	return fmt.Errorf("peer %s has no TCP-AO binding in the policy: %w", arg, control.ErrNotFound)
}
