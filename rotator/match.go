package rotator

import "github.com/aokeyd/aokeyd/tcpao"

// How the planner matches an observed key with the keys Desired names.

// names reports whether list names the observed key r (normalised): the
// same reference, or on an established socket the same session key.
func (p *planner) names(list []tcpao.KeyRef, r tcpao.KeyRef) bool {
	for _, x := range list {
		if x = normRef(x); x == r || !p.listen && sameSessionKey(x, r) {
			return true
		}
	}
	return false
}

// revoked reports whether Desired.Revoked names the observed key ki (its
// reference r normalised): as names does, and with its material. A key
// under a revoked reference with other material is not the revoked key.
func (p *planner) revoked(ki *tcpao.KeyInfo, r tcpao.KeyRef) bool {
	if p.listen && len(p.d.Revoked) > linearMax {
		// A listener names a revoked key by its exact reference: a set,
		// not a scan of the list per key (a revoke across a fleet lists
		// the key under every peer's prefix, the listener holds three
		// keys a peer: O(peers^2) a plan).
		if p.revokedIdx == nil {
			p.revokedIdx = make(map[revokedID]struct{}, len(p.d.Revoked))
			for _, x := range p.d.Revoked {
				p.revokedIdx[revokedID{keyOf(normRef(x.KeyRef)), x.Fingerprint}] = struct{}{}
			}
		}
		_, ok := p.revokedIdx[revokedID{keyOf(r), ki.Fingerprint}]
		return ok
	}
	for _, x := range p.d.Revoked {
		if x.Fingerprint != ki.Fingerprint {
			continue
		}
		if n := normRef(x.KeyRef); n == r || !p.listen && sameSessionKey(n, r) {
			return true
		}
	}
	return false
}

// revokedID is a revoked key's normalised reference and its material.
type revokedID struct {
	ref refKey
	fp  tcpao.Fingerprint
}

// frozen reports whether a Desired.Frozen range covers the observed key r.
func (p *planner) frozen(r tcpao.KeyRef) bool {
	for _, k := range p.d.Frozen {
		if k.Covers(r) {
			return true
		}
	}
	return false
}

// sameSessionKey reports whether a and b (normalised) name the same key on
// an established socket: the same IDs and L3 device, and overlapping peer
// prefixes (a key inherited from a listener carries the binding's prefix,
// a desired one may name the peer's host prefix).
func sameSessionKey(a, b tcpao.KeyRef) bool {
	return a.SendID == b.SendID && a.RecvID == b.RecvID && a.IfIndex == b.IfIndex && prefixesOverlap(a.Peer, b.Peer)
}

func sameMaterial(k *tcpao.Key, ki *tcpao.KeyInfo) bool {
	ml := func(m uint8) uint8 {
		if m == 0 {
			return tcpao.DefaultMACLen
		}
		return m
	}
	return k.Algorithm == ki.Algorithm && ml(k.MACLen) == ml(ki.MACLen) &&
		k.ExcludeOptions == ki.ExcludeOptions && k.Secret.Fingerprint() == ki.Fingerprint
}
