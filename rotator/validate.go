package rotator

import (
	"fmt"

	"github.com/aokeyd/aokeyd/tcpao"
)

// validateDesired refuses a desired state the planner cannot plan from: a
// key that is not valid or is also revoked, two desired keys whose IDs
// collide (the kernel would refuse the second with EEXIST), or a wanted
// Current_key or RNext_key that no desired key provides.
func validateDesired(d *Desired) error {
	n := len(d.Keys)
	revoked := revokedRefs(d.Revoked)
	for i := range d.Keys {
		k := &d.Keys[i]
		if err := k.Validate(); err != nil {
			return fmt.Errorf("socket %s: desired key %s: %w", d.Socket, k.KeyRef, err)
		}
		if revoked.has(d.Revoked, k.KeyRef) {
			return fmt.Errorf("socket %s: desired key %s is revoked", d.Socket, k.KeyRef)
		}
	}
	clash := func(i, j int) error {
		return fmt.Errorf("socket %s: desired keys %s and %s share a KeyID for overlapping peers (the kernel answers EEXIST)",
			d.Socket, d.Keys[i].KeyRef, d.Keys[j].KeyRef)
	}
	if n <= linearMax {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if conflicts(normRef(d.Keys[i].KeyRef), normRef(d.Keys[j].KeyRef)) {
					return clash(i, j)
				}
			}
		}
	} else {
		idx := newRefIndex(n)
		for i := range d.Keys {
			r := normRef(d.Keys[i].KeyRef)
			if j := idx.find(r, func(j int) bool {
				return conflicts(normRef(d.Keys[j].KeyRef), r) || conflicts(r, normRef(d.Keys[j].KeyRef))
			}); j >= 0 {
				return clash(j, i)
			}
			idx.add(r.Peer, i)
		}
	}
	if !d.WantCurrent.Valid && !d.WantRNext.Valid || d.Kind == Listening {
		return nil
	}
	var haveCur, haveRNext bool
	for i := range d.Keys {
		if d.Keys[i].SendID == d.WantCurrent.ID && !d.Keys[i].AcceptOnly {
			haveCur = true
		}
		if d.Keys[i].RecvID == d.WantRNext.ID {
			haveRNext = true
		}
	}
	if d.WantCurrent.Valid && !haveCur {
		return fmt.Errorf("socket %s: wanted current SendID %d is not a desired sendable key", d.Socket, d.WantCurrent.ID)
	}
	if d.WantRNext.Valid && !haveRNext {
		return fmt.Errorf("socket %s: wanted rnext RecvID %d is not a desired key", d.Socket, d.WantRNext.ID)
	}
	return nil
}

// revokedSet is Desired.Revoked's references, normalised (normRef), when
// there are more than linearMax (nil: few, compared one by one). A revoke
// across a fleet names the key under every peer's prefix on the listener,
// whose desired keys are three a peer: each desired key compared with
// every revoked one was O(peers^2) per listener plan (3,072 x 1,024 pairs
// at 1,024 peers, each normalised, for every plan of the listener while
// the revocation lasts).
type revokedSet map[tcpao.KeyRef]struct{}

func revokedRefs(rs []RevokedKey) revokedSet {
	if len(rs) <= linearMax {
		return nil
	}
	s := make(revokedSet, len(rs))
	for _, r := range rs {
		s[normRef(r.KeyRef)] = struct{}{}
	}
	return s
}

// has reports whether ref is one of rs by reference (normRef); s is
// revokedRefs(rs).
func (s revokedSet) has(rs []RevokedKey, ref tcpao.KeyRef) bool {
	ref = normRef(ref)
	if s != nil {
		_, ok := s[ref]
		return ok
	}
	for _, r := range rs {
		if normRef(r.KeyRef) == ref {
			return true
		}
	}
	return false
}
