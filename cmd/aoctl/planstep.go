package main

import (
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// keyName is a key's chain and name in the key source.
type keyName struct{ chain, key string }

// keyIDs are a key's SendID and RecvID.
type keyIDs [2]uint8

// namesOf names a binding's keys by their IDs: its desired keys, and the
// other keys of its source chain whose IDs no other key of the chain has
// (a revoked or expired key a del removes). IDs that name more than one
// key are left out: a step is not named rather than misnamed.
func namesOf(pk policy.PeerKeys, snap *keystore.Snapshot) map[keyIDs]keyName {
	out := map[keyIDs]keyName{}
	for _, k := range pk.Keys {
		out[keyIDs{k.MKT.SendID, k.MKT.RecvID}] = keyName{k.MKT.Chain, k.MKT.Name}
	}
	c := snap.Chains[pk.SourceChain]
	if c == nil {
		return out
	}
	count := map[keyIDs]int{}
	for _, m := range c.Keys {
		count[keyIDs{m.SendID, m.RecvID}]++
	}
	for _, m := range c.Keys {
		id := keyIDs{m.SendID, m.RecvID}
		if _, desired := out[id]; !desired && count[id] == 1 {
			out[id] = keyName{m.Chain, m.Name}
		}
	}
	return out
}

// bindingNamer names a plan line's key by the socket's binding's keys
// (namesOf).
func bindingNamer(names map[rotator.SocketID]map[keyIDs]keyName) desired.Namer {
	return func(sock rotator.SocketID, l rotator.PlanLine) (string, string, bool) {
		n, ok := names[sock][keyIDs{l.Ref.SendID, l.Ref.RecvID}]
		return n.chain, n.key, ok
	}
}
