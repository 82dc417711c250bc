package policy

import "slices"

// Revoke takes the MKT name out of pk as a revoked key of the peer: it
// leaves Keys, joins Revoked, and Preferred is chosen again among the
// keys left. It is how a revocation scoped to one peer (which the shared
// snapshot cannot carry) applies to that peer's answer. It reports whether
// pk changed.
func (pk *PeerKeys) Revoke(name string) bool {
	i := slices.IndexFunc(pk.Keys, func(k ScheduledKey) bool { return k.MKT.Name == name })
	if i < 0 {
		return false
	}
	pk.Keys = slices.Delete(slices.Clone(pk.Keys), i, i+1)
	if !slices.Contains(pk.Revoked, name) {
		pk.Revoked = append(slices.Clip(pk.Revoked), name)
	}
	pk.Preferred = -1
	for j, k := range pk.Keys {
		if k.Sendable && (pk.Preferred < 0 || preferBefore(k, pk.Keys[pk.Preferred])) {
			pk.Preferred = j
		}
	}
	return true
}
