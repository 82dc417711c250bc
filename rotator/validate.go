package rotator

import "fmt"

// validateDesired refuses a desired state the planner cannot plan from: a
// key that is not valid or is also revoked, two desired keys whose IDs
// collide (the kernel would refuse the second with EEXIST), or a wanted
// Current_key or RNext_key that no desired key provides.
func validateDesired(d *Desired) error {
	n := len(d.Keys)
	for i := range d.Keys {
		k := &d.Keys[i]
		if err := k.Validate(); err != nil {
			return fmt.Errorf("socket %s: desired key %s: %w", d.Socket, k.KeyRef, err)
		}
		for _, r := range d.Revoked {
			if normRef(r.KeyRef) == normRef(k.KeyRef) {
				return fmt.Errorf("socket %s: desired key %s is revoked", d.Socket, k.KeyRef)
			}
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
