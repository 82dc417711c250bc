package policy

import (
	"net/netip"
	"slices"
)

// bindingIndex finds the binding covering a peer without scanning every
// binding. Its answer is the binding with the lowest position among those
// whose VRF matches and whose neighbor prefix contains the peer: the same as
// a first-match scan in file order, whether or not bindings overlap.
//
// A lookup costs one map lookup for the VRF, one for host bindings (/32,
// /128) and one per distinct non-host prefix length of the peer's family in
// that VRF.
type bindingIndex struct {
	vrfs map[string]*vrfIndex
}

type vrfIndex struct {
	// hosts maps the address of each host binding to its lowest position.
	hosts map[netip.Addr]int
	// v4 and v6 hold the non-host prefix lengths that occur, ascending.
	v4, v6 []lenIndex
}

// lenIndex maps masked prefixes of one length to their lowest position.
type lenIndex struct {
	bits int
	at   map[netip.Prefix]int
}

// add records b at position pos. Positions must be added in ascending
// order: an earlier position of the same prefix is kept.
func (x *bindingIndex) add(pos int, b *Binding) {
	pfx := b.Neighbor.Masked()
	if !pfx.IsValid() {
		return // contains nothing
	}
	if x.vrfs == nil {
		x.vrfs = map[string]*vrfIndex{}
	}
	v := x.vrfs[b.VRF]
	if v == nil {
		v = &vrfIndex{hosts: map[netip.Addr]int{}}
		x.vrfs[b.VRF] = v
	}
	if pfx.IsSingleIP() {
		if _, dup := v.hosts[pfx.Addr()]; !dup {
			v.hosts[pfx.Addr()] = pos
		}
		return
	}
	lens := &v.v6
	if pfx.Addr().Is4() {
		lens = &v.v4
	}
	i, found := slices.BinarySearchFunc(*lens, pfx.Bits(), func(l lenIndex, bits int) int { return l.bits - bits })
	if !found {
		*lens = slices.Insert(*lens, i, lenIndex{bits: pfx.Bits(), at: map[netip.Prefix]int{}})
	}
	if _, dup := (*lens)[i].at[pfx]; !dup {
		(*lens)[i].at[pfx] = pos
	}
}

// lookup returns the lowest position of a binding in vrf that contains
// peer, which must already be unmapped and without zone.
func (x *bindingIndex) lookup(peer netip.Addr, vrf string) (int, bool) {
	v := x.vrfs[vrf]
	if v == nil || !peer.IsValid() {
		return -1, false
	}
	best, found := v.hosts[peer]
	if !found {
		best = -1
	}
	lens := v.v6
	if peer.Is4() {
		lens = v.v4
	}
	for _, l := range lens {
		pfx, err := peer.Prefix(l.bits)
		if err != nil {
			continue
		}
		if pos, ok := l.at[pfx]; ok && (!found || pos < best) {
			best, found = pos, true
		}
	}
	return best, found
}
