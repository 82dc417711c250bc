package migrate

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/policy"
)

// The kernel's rules a covering prefix is chosen by (tcpao's md5/ and
// closed/ conformance cases, both kernels):
//
//   - a TCP-AO prefix key is checked against the TCP-MD5 keys at its
//     network address only (md5/ao-prefix-checked-at-its-network-address):
//     it is refused (EKEYREJECTED) when an MD5 key covers that address,
//     and taken beside MD5 keys of other addresses inside it, whose
//     peers keep connecting with TCP-MD5, never unsigned, but cannot take
//     a new password while it stands;
//   - two TCP-AO keys of overlapping prefixes may not share a SendID or a
//     RecvID (closed/overlapping-prefix-eexist): the second is EEXIST;
//   - a TCP-AO key over an address refuses that address's unsigned SYNs
//     (connect/unsigned-to-ao-listener-refused): a neighbor that connects
//     unsigned inside the prefix would be locked out.
//
// On a peering LAN whose members hold consecutive addresses every member
// is inside every other's candidates; the first rule lets a member's keys
// sit over its neighbours' passwords, the second asks that members whose
// prefixes overlap send and receive with key IDs of their own.

// Kind is what a listener holds for a neighbor at a prefix.
type Kind uint8

// The kinds.
const (
	Unsigned Kind = iota // nothing: its SYNs are taken unsigned
	MD5                  // a TCP-MD5 password
	AO                   // TCP-AO keys (Neighbor.IDs)
)

// KeyIDs are one TCP-AO key's SendID and RecvID (the policy's, which
// reads them from the chains).
type KeyIDs = policy.KeyIDs

// Neighbor is one thing on the listener that a covering prefix must
// regard: another neighbor's key (or its lack of one) at its prefix. A
// neighbor migrating has two: its password at its address, its TCP-AO
// keys at its own covering prefix.
type Neighbor struct {
	Name   string // how errors name it: "10.0.0.5", "10.0.0.5 vrf red"
	Prefix netip.Prefix
	Kind   Kind
	IDs    []KeyIDs // AO: its keys' IDs
}

// Covering is where a migrating peer's TCP-AO keys (IDs own) go on the
// listener: the longest prefix containing peer, at most maxShorter bits
// shorter than a host prefix, that the kernel takes beside the peer's
// TCP-MD5 key and that locks no one out:
//   - its network address is not the peer's and no TCP-MD5 key covers it;
//   - it covers no neighbor that connects unsigned;
//   - no neighbor's TCP-AO keys overlapping it share a SendID or RecvID
//     with the peer's.
//
// Neighbors with a TCP-MD5 password may be inside it. When there is none,
// the error says why the widest candidate was refused and what to do.
func Covering(peer netip.Addr, own []KeyIDs, others []Neighbor, maxShorter int) (netip.Prefix, error) {
	peer = peer.Unmap()
	var why string
	for bits := peer.BitLen() - 1; bits >= peer.BitLen()-maxShorter && bits > 0; bits-- {
		p, _ := peer.Prefix(bits)
		if why = refuses(p, peer, own, others); why == "" {
			return p, nil
		}
	}
	if why == "" {
		return netip.Prefix{}, fmt.Errorf("no prefix of up to %d bits around %s", maxShorter, peer)
	}
	return netip.Prefix{}, fmt.Errorf("no prefix of up to %d bits around %s can hold its TCP-AO keys beside its TCP-MD5 key (the widest, %s: %s)",
		maxShorter, peer, netip.PrefixFrom(peer, peer.BitLen()-maxShorter).Masked(), why)
}

// refuses says why p cannot be peer's covering prefix, "" when it can.
func refuses(p netip.Prefix, peer netip.Addr, own []KeyIDs, others []Neighbor) string {
	if p.Addr() == peer {
		return "its network address is the peer's own, under its TCP-MD5 key"
	}
	for _, n := range others {
		switch {
		case n.Kind == MD5 && n.Prefix.Contains(p.Addr()):
			return fmt.Sprintf("its network address %s is under %s's TCP-MD5 key, and the kernel refuses a TCP-AO prefix there", p.Addr(), n.Name)
		case n.Kind == Unsigned && p.Overlaps(n.Prefix):
			return fmt.Sprintf("it would cover %s, which connects unsigned and would be locked out", n.Name)
		case n.Kind == AO && p.Overlaps(n.Prefix):
			for _, o := range own {
				if slices.ContainsFunc(n.IDs, func(x KeyIDs) bool { return x.Send == o.Send || x.Recv == o.Recv }) {
					return fmt.Sprintf("it overlaps %s's TCP-AO keys at %s, which share a key ID with the peer's (send %d, receive %d), "+
						"and the kernel refuses overlapping keys with one SendID or RecvID: give the two chains key IDs of their own",
						n.Name, n.Prefix, o.Send, o.Recv)
				}
			}
		}
	}
	return ""
}
