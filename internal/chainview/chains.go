// Package chainview is the key chain view of aoctl status --keys: per
// chain of the policy, the key its peers send with now, the next one and
// when. The daemon and the native BIRD driver both serve it; it links
// neither the rotator nor a speaker.
package chainview

import (
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// maxChainSteps bounds how many lifetime boundaries Chains walks to find a
// chain's next key to send with.
const maxChainSteps = 64

// Chains is the key chain view of aoctl status --keys, as Junos' show
// security keychain gives it: for each chain the policy's bindings use, in
// the policy's order, the key its peers send with at now, the next key to
// send with and from when, and the keys a peer of the chain holds at now.
// It is computed for the chain's first binding (a chain's schedule is the
// chain's: bindings change only which peers take it). Names and IDs only,
// never key material.
func Chains(pol *policy.Policy, snap *keystore.Snapshot, now time.Time) []control.ChainStatus {
	if pol == nil || snap == nil {
		return nil
	}
	first := map[string]policy.Binding{}
	count := map[string]int{}
	var order []string
	for _, b := range pol.Bindings() {
		if count[b.KeyChain] == 0 {
			first[b.KeyChain] = b
			order = append(order, b.KeyChain)
		}
		count[b.KeyChain]++
	}
	var out []control.ChainStatus
	for _, name := range order {
		b := first[name]
		cs := control.ChainStatus{Chain: name, Bindings: count[name], Keys: []control.ChainKey{}}
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err != nil {
			cs.Problem = err.Error()
			out = append(out, cs)
			continue
		}
		for _, k := range pk.Keys {
			cs.Keys = append(cs.Keys, chainKey(k))
		}
		if k, ok := pk.PreferredKey(); ok {
			ck := chainKey(k)
			cs.Sending = &ck
		}
		cs.Next, cs.NextAt = nextSending(pol, snap, b, pk, cs.Sending)
		out = append(out, cs)
	}
	return out
}

// nextSending walks the lifetime boundaries after pk's instant to the
// first at which another key is sent with (or none is).
func nextSending(pol *policy.Policy, snap *keystore.Snapshot, b policy.Binding, pk policy.PeerKeys, now *control.ChainKey) (*control.ChainKey, time.Time) {
	t := pk.NextChange
	for i := 0; i < maxChainSteps && !t.IsZero(); i++ {
		next, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, t)
		if err != nil {
			return nil, time.Time{}
		}
		k, ok := next.PreferredKey()
		switch {
		case ok && (now == nil || k.MKT.Name != now.Name):
			ck := chainKey(k)
			return &ck, t
		case !ok && now != nil:
			return nil, t // nothing to send with from t on
		}
		t = next.NextChange
	}
	return nil, time.Time{}
}

func chainKey(k policy.ScheduledKey) control.ChainKey {
	return control.ChainKey{Name: k.MKT.Name, SendID: k.MKT.SendID, RecvID: k.MKT.RecvID,
		SendLifetime:   control.Lifetime{Start: k.SendLifetime.Start, End: k.SendLifetime.End},
		AcceptLifetime: control.Lifetime{Start: k.AcceptLifetime.Start, End: k.AcceptLifetime.End}}
}
