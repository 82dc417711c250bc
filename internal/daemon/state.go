package daemon

import (
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// The Daemon's state, one owner for each piece (see doc.go):
//
//   - rotator.Controller: each peer's desired keys and whether a rotation
//     machine runs on its session (SetDesired, Adopt, Runs); each
//     session's socket is written by its machine alone.
//   - reconciler: the pass inputs, the listeners' desired keys and the
//     listening sockets, which only the reconcile goroutine (Run) writes;
//     a revoke asks it to take a key off them (listenerRevoke), the listen
//     guard to key a socket held in listen(2) (listenAsk).
//   - peerTable: what the speaker reported of each peer (session, binding,
//     socket handle), written by the session events and the pass's
//     take-overs and forgets.
//   - operatorAsks: what operators asked for that the next pass applies
//     (aoctl rotate's early rolls, aoctl replace's approvals).
//   - policyState: the policy in force, swapped whole by SetPolicy.
//   - scrapeView: what the metrics already hold, the scrape's alone.
//   - listenerWatch: the speaker's pid as the listener syncs found it, and
//     the listener watch's last listing (lwatch.go).

// listenerWant is the listeners' desired state per address family.
type listenerWant struct{ v4, v6 rotator.Desired }

// optMemUse is net.core.optmem_max as the listener sync saw it and what
// the listener with the most keys needs.
type optMemUse struct{ limit, needed int }

// policyState is the policy in force and the source chains its bindings
// read (the key cache holds back only those), computed together.
type policyState struct {
	pol   *policy.Policy
	bound map[string]bool
}

func newPolicyState(p *policy.Policy) *policyState {
	set := map[string]bool{}
	for _, b := range p.Bindings() {
		if c, ok := p.Chain(b.KeyChain); ok {
			set[c.SourceChain] = true
		}
	}
	return &policyState{pol: p, bound: set}
}
