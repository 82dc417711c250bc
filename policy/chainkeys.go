package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// ChainKeys returns every key of the chain bound to peer (in vrf) that
// applies to the peer, whatever its lifetimes: the keys `aoctl peer-config`
// renders for the far end. Each carries its effective lifetimes (the
// policy's overrides, else the MKT's) and TCP-option setting (the
// binding's, else the MKT's); Sendable is false. Revoked keys and keys the
// kernel would reject are left out. The MKTs' secrets share snap's bytes.
// Sorted by send start, then name.
func (p *Policy) ChainKeys(snap *keystore.Snapshot, peer netip.Addr, vrf string) (Binding, []ScheduledKey, error) {
	peer = peer.Unmap().WithZone("")
	b, err := p.bindingFor(peer, vrf)
	if err != nil {
		return Binding{}, nil, err
	}
	return p.chainKeys(snap, b, func(m *keystore.MKT) bool { return appliesTo(m, peer, vrf) })
}

// ChainKeysOnLink is ChainKeys for the interface neighbour on the
// interface named iface in vrf (issue 53): its binding is the
// interface's, and as the address it learns is not known here, the keys
// are those that apply to a link-local address (their peers overlap
// fe80::/10, as Validate checks them).
func (p *Policy) ChainKeysOnLink(snap *keystore.Snapshot, iface, vrf string) (Binding, []ScheduledKey, error) {
	i := slices.IndexFunc(p.links, func(b *Binding) bool { return b.VRF == vrf && b.BindsLink(iface) })
	if i < 0 {
		return Binding{}, nil, fmt.Errorf("%w: interface neighbour on %s in VRF %q", ErrNoBinding, iface, vrf)
	}
	return p.chainKeys(snap, p.links[i], func(m *keystore.MKT) bool { return appliesToPrefix(m, LinkLocal, vrf) })
}

// chainKeys is ChainKeys's answer for binding b, with the keys applies
// takes.
func (p *Policy) chainKeys(snap *keystore.Snapshot, b *Binding, applies func(*keystore.MKT) bool) (Binding, []ScheduledKey, error) {
	c, sc, err := p.chainsOf(snap, b)
	if err != nil {
		return *b, nil, err
	}
	cands, _ := candidates(nil, c, sc)
	var out []ScheduledKey
	for _, cd := range cands {
		m := cd.mkt
		if !applies(m) || m.Revoked || checkMKT(m) != nil {
			continue
		}
		inc := m.IncludeTCPOptions
		if b.IncludeTCPOptions != nil {
			inc = *b.IncludeTCPOptions
		}
		out = append(out, ScheduledKey{MKT: *m, SendLifetime: cd.send, AcceptLifetime: cd.accept, IncludeTCPOptions: inc})
	}
	slices.SortFunc(out, func(x, y ScheduledKey) int {
		return cmp.Or(x.SendLifetime.Start.Compare(y.SendLifetime.Start), cmp.Compare(x.MKT.Name, y.MKT.Name))
	})
	return *b, out, nil
}

// SendCoverageEnd is the instant from which keys (a peer's ChainKeys)
// leave it with no key to send with, following their send lifetimes from
// t: zero when coverage never ends, t itself when no key may be sent with
// at t. aokeyd exports it so that an alert fires while a successor key can
// still be added.
func SendCoverageEnd(keys []ScheduledKey, t time.Time) time.Time {
	for {
		covered := false
		reach := t
		for _, k := range keys {
			if !k.SendLifetime.Contains(t) {
				continue
			}
			if k.SendLifetime.End.IsZero() {
				return time.Time{}
			}
			covered = true
			if k.SendLifetime.End.After(reach) {
				reach = k.SendLifetime.End
			}
		}
		if !covered {
			return t
		}
		t = reach
	}
}
