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
	c := p.byName[b.KeyChain]
	var sc *keystore.Chain
	if snap != nil {
		sc = snap.Chains[c.SourceChain]
	}
	if sc == nil {
		return *b, nil, fmt.Errorf("%w: key chain %q reads source chain %q, which the snapshot does not have",
			ErrUnknownChain, c.Name, c.SourceChain)
	}
	cands, _ := candidates(nil, c, sc)
	var out []ScheduledKey
	for _, cd := range cands {
		m := cd.mkt
		if !appliesTo(m, peer, vrf) || m.Revoked || checkMKT(m) != nil {
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
