package rotator

import (
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

// refIndex finds keys by peer prefix without comparing every pair: exact
// prefixes go to a map, and the few wider ones (subnets, any-address) are
// compared with everything. The keys of one prefix are chained through next
// (in the order they were added) instead of a slice per prefix, so that an
// index of thousands of peers costs a few allocations, not one per peer.
type refIndex struct {
	byPrefix map[refKey]chain
	item     []int32 // slot -> key index, in the order added
	next     []int32 // slot -> next slot with the same host prefix, -1 none
	wide     []int
}

// chain is the first and last slot of one host prefix's keys.
type chain struct{ first, last int32 }

func newRefIndex(n int) *refIndex {
	return &refIndex{byPrefix: make(map[refKey]chain, n), item: make([]int32, 0, n), next: make([]int32, 0, n)}
}

func isHost(p netip.Prefix) bool { return p.Bits() == p.Addr().BitLen() }

func (x *refIndex) add(p netip.Prefix, i int) {
	slot := int32(len(x.item))
	x.item = append(x.item, int32(i))
	x.next = append(x.next, -1)
	if !isHost(p) {
		x.wide = append(x.wide, i)
		return
	}
	k := prefixKey(p)
	if c, ok := x.byPrefix[k]; ok {
		x.next[c.last] = slot
		x.byPrefix[k] = chain{c.first, slot}
		return
	}
	x.byPrefix[k] = chain{slot, slot}
}

// find calls match for every indexed key that may overlap r.Peer until
// match returns true, and returns that key or -1.
func (x *refIndex) find(r tcpao.KeyRef, match func(int) bool) int {
	if !isHost(r.Peer) {
		for _, i := range x.item {
			if match(int(i)) {
				return int(i)
			}
		}
		return -1
	}
	if c, ok := x.byPrefix[prefixKey(r.Peer)]; ok {
		for slot := c.first; slot >= 0; slot = x.next[slot] {
			if i := int(x.item[slot]); match(i) {
				return i
			}
		}
	}
	for _, i := range x.wide {
		if match(i) {
			return i
		}
	}
	return -1
}

// carried reports whether a listener key r (normalised) is one a session
// carries: a carried session key with its IDs and L3 device whose peer
// prefix overlaps r's. A listener carries one key or more per session: a
// long list is indexed by prefix once per plan, so that each of the
// listener's keys is compared with the carried keys of its own peer, not
// with every session's (which made an idle pass over thousands of peers
// quadratic).
func (p *planner) carried(list []tcpao.KeyRef, r tcpao.KeyRef) bool {
	if len(list) <= carriedIndexMin {
		for _, x := range list {
			if sameSessionKey(normRef(x), r) {
				return true
			}
		}
		return false
	}
	if p.carriedIdx == nil {
		p.carriedRefs = make([]tcpao.KeyRef, len(list))
		p.carriedIdx = newRefIndex(len(list))
		for i, x := range list {
			p.carriedRefs[i] = normRef(x)
			p.carriedIdx.add(p.carriedRefs[i].Peer, i)
		}
	}
	return p.carriedIdx.find(r, func(i int) bool { return sameSessionKey(p.carriedRefs[i], r) }) >= 0
}

// carriedIndexMin is the longest Carried list compared key by key.
const carriedIndexMin = 16
