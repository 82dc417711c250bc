// Package early names the key an operator's `aoctl rotate` rolls a peer
// to ahead of its send start, and says while that key, not the
// schedule's, is the one the peer sends with. The daemon (which also
// follows the roll: internal/daemon early.go) and the BIRD native driver
// share it; it links neither the rotator nor the daemon.
package early

import (
	"fmt"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Material is what a key is made of besides its IDs: an edit in place
// changes it. It holds a fingerprint (a keyed digest), never the secret.
type Material struct {
	Alg         tcpao.Algorithm
	MACLen      uint8
	Include     bool // tcp_options include
	Fingerprint tcpao.Fingerprint
}

// MaterialOf is m's material.
func MaterialOf(m *keystore.MKT) Material {
	return Material{Alg: m.Algorithm, MACLen: m.MACLen, Include: m.IncludeTCPOptions, Fingerprint: m.Secret.Fingerprint()}
}

// Key is the key an `aoctl rotate` rolls a peer to ahead of its send
// start (its target), as the key source had it when the operator asked:
// the source chain, the key's name, IDs and material, and its send start.
// The peer sends with that key, and no other, until the schedule reaches
// it (In); a key that is newer later is not it.
type Key struct {
	Chain, Name    string
	SendID, RecvID uint8
	Material       Material
	Start          time.Time // the send start (the policy's)
}

// KeyOf is pk's key i as a Key.
func KeyOf(pk policy.PeerKeys, i int) Key {
	k := pk.Keys[i]
	return Key{Chain: pk.SourceChain, Name: k.MKT.Name, SendID: k.MKT.SendID, RecvID: k.MKT.RecvID,
		Material: MaterialOf(&k.MKT), Start: k.SendLifetime.Start}
}

// Label names the key, CHAIN/NAME.
func (k Key) Label() string { return k.Chain + "/" + k.Name }

// Same reports whether o names the same key (its send start aside).
func (k Key) Same(o Key) bool {
	return k.Chain == o.Chain && k.Name == o.Name && k.SendID == o.SendID && k.RecvID == o.RecvID && k.Material == o.Material
}

// In is the index in pk.Keys of the key the peer is to send with while
// an aoctl rotate to k holds: k itself, while it is one of pk's keys and
// the schedule has not reached it. Otherwise it is -1 and why says why
// not; caughtUp when the schedule did reach it (pk's preferred key is k,
// or one that starts sending no earlier): the request has done its work.
func (k Key) In(pk policy.PeerKeys) (i int, why string, caughtUp bool) {
	i, why = k.index(pk)
	switch {
	case i < 0:
		return -1, why, false
	case i == pk.Preferred:
		return -1, "the schedule sends with it now", true
	case pk.Preferred >= 0 && !pk.Keys[pk.Preferred].SendLifetime.Start.Before(pk.Keys[i].SendLifetime.Start):
		return -1, "the schedule sends with " + pk.Keys[pk.Preferred].MKT.Name + ", which starts no earlier", true
	}
	return i, "", false
}

// index is k's index in pk.Keys; why, when it is not there, says why not.
func (k Key) index(pk policy.PeerKeys) (i int, why string) {
	if pk.SourceChain != k.Chain {
		return -1, fmt.Sprintf("the peer's key chain is %s now", pk.SourceChain)
	}
	for i, sk := range pk.Keys {
		if sk.MKT.Name != k.Name {
			continue
		}
		if sk.MKT.SendID != k.SendID || sk.MKT.RecvID != k.RecvID || MaterialOf(&sk.MKT) != k.Material {
			return -1, "its IDs or material changed in the key source"
		}
		return i, ""
	}
	if slices.Contains(pk.Revoked, k.Name) {
		return -1, "it was revoked"
	}
	return -1, "it is no longer one of the peer's keys in the key source"
}

// Newest is the index in pk.Keys of the key an aoctl rotate rolls to: the
// one with the latest send start whose send lifetime has not ended at now
// (ties go to the schedule's preferred key); -1 when there is none.
func Newest(pk policy.PeerKeys, now time.Time) int {
	best := -1
	for i, k := range pk.Keys {
		if end := k.SendLifetime.End; !end.IsZero() && !now.Before(end) {
			continue // sent with no more: nothing to roll to ahead of time
		}
		if best < 0 {
			best = i
			continue
		}
		switch k.SendLifetime.Start.Compare(pk.Keys[best].SendLifetime.Start) {
		case 1:
			best = i
		case 0:
			if i == pk.Preferred {
				best = i
			}
		}
	}
	return best
}
