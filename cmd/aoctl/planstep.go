package main

import (
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// keyName is a key's chain and name in the key source.
type keyName struct{ chain, key string }

func (n keyName) String() string { return n.chain + "/" + n.key }

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

// planSteps renders plan as Render's lines, each step about a key naming
// it (chain/key) after its verb when names has it, and as objects.
func planSteps(plan rotator.Plan, names map[rotator.SocketID]map[keyIDs]keyName) ([]string, []control.PlanStep) {
	var lines []string
	var steps []control.PlanStep
	for _, l := range rotator.PlanLines(plan) {
		st := control.PlanStep{Socket: string(l.Socket), Kind: l.Kind.String(), Op: l.Verb}
		if l.Verb != "ok" {
			st.Reason = l.Why.String()
		}
		text := l.Line()
		if l.HasRef {
			st.KeyRef = &control.PlanKeyRef{SendID: l.Ref.SendID, RecvID: l.Ref.RecvID, Peer: l.Ref.Peer.String(), IfIndex: l.Ref.IfIndex}
			if n, ok := names[l.Socket][keyIDs{l.Ref.SendID, l.Ref.RecvID}]; ok {
				st.Chain, st.Key = n.chain, n.key
				text = l.Head + " " + n.String() + l.Tail
			}
		}
		st.Text = text
		lines = append(lines, text)
		steps = append(steps, st)
	}
	return lines, steps
}
