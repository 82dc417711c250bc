package keystore

import (
	"fmt"
	"net/netip"
)

// checkDuplicateIDs rejects, across all chains of a snapshot, a key whose
// SendID or RecvID is already used by another non-revoked key for an
// overlapping peer prefix in the same VRF (RFC 5925 section 3.1: the IDs of
// MKTs must not overlap where their connection identifiers overlap; the
// kernel answers EEXIST). Keys are visited in chain and list order; the
// later one is rejected. Two prefixes overlap iff one contains the other, so
// each check is a walk over the prefix's ancestors plus one lookup in the
// set of ancestors of kept prefixes: linear in the number of peers.
func checkDuplicateIDs(s *Snapshot) {
	type owner struct{ chain, key string }
	type idKey struct {
		vrf   string
		field string
		id    uint8
		p     netip.Prefix
	}
	exact := map[idKey]owner{}   // kept prefixes
	covered := map[idKey]owner{} // every ancestor of a kept prefix, itself included
	clash := func(vrf, field string, id uint8, peers []netip.Prefix) (owner, bool) {
		for _, p := range peers {
			if o, ok := covered[idKey{vrf, field, id, p}]; ok {
				return o, true
			}
			for b := 0; b < p.Bits(); b++ {
				if o, ok := exact[idKey{vrf, field, id, netip.PrefixFrom(p.Addr(), b).Masked()}]; ok {
					return o, true
				}
			}
		}
		return owner{}, false
	}
	for _, cn := range s.ChainNames() {
		c := s.Chains[cn]
		keys := c.Keys[:0]
		for _, m := range c.Keys {
			if m.Revoked {
				keys = append(keys, m)
				continue
			}
			o, bad := clash(m.VRF, "send_id", m.SendID, m.Peers)
			field := "send_id"
			if !bad {
				o, bad = clash(m.VRF, "recv_id", m.RecvID, m.Peers)
				field = "recv_id"
			}
			if bad {
				c.Rejected = append(c.Rejected, &FieldError{Pos: m.At, Chain: cn, Key: m.Name, Field: join(m.Path, field),
					Err: fmt.Errorf("%w: %s already used by chain %q key %q for an overlapping peer", ErrDuplicate, field, o.chain, o.key)})
				m.Zero()
				continue
			}
			me := owner{cn, m.Name}
			for _, f := range []struct {
				field string
				id    uint8
			}{{"send_id", m.SendID}, {"recv_id", m.RecvID}} {
				for _, p := range m.Peers {
					exact[idKey{m.VRF, f.field, f.id, p}] = me
					for b := 0; b <= p.Bits(); b++ {
						k := idKey{m.VRF, f.field, f.id, netip.PrefixFrom(p.Addr(), b).Masked()}
						if _, ok := covered[k]; !ok {
							covered[k] = me
						}
					}
				}
			}
			keys = append(keys, m)
		}
		c.Keys = keys
	}
}
