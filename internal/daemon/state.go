package daemon

import (
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// The Daemon's state, one owner for each piece (see doc.go). Each part
// is a type with its own fields and methods, built by New (newCore) over
// the core they share (core.go), and reached by the others through its
// methods only (parts_test.go):
//
//   - rotator.Controller (core.ctrl): each peer's desired keys and whether
//     a rotation machine runs on its session (SetDesired, Adopt, Runs);
//     each session's socket is written by its machine alone.
//   - reconciler (reconciler.go, reconcile.go, listen.go, md5.go,
//     carried.go, lwatch.go, ...): the pass inputs, the listeners' desired
//     keys and the listening sockets, which only the reconcile goroutine
//     (run) writes; a revoke asks it to take a key off them
//     (askListenerRevoke), the listen guard to key a socket held in
//     listen(2) (listenKeys). It owns the carried-keys record and the
//     listener watch's state (listenerWatch) too.
//   - peerTable (peers.go): what the speaker reported of each peer
//     (session, binding, socket handle), written by the session events it
//     handles (OnEstablished, OnDown, takeOver) and the pass's forgets.
//   - revocations (revoke.go): the revocation record, written only by a
//     revoke; the passes read it (Apply, Scope, Count).
//   - ownership (ownership.go, adopt.go, replace.go): the ledger of the
//     keys aokeyd installed and aoctl replace's approvals.
//   - migrations (migrate.go): the TCP-MD5 to TCP-AO migration record.
//   - earlyRolls (early.go, earlyrecord.go, rotate.go): aoctl rotate's
//     early rolls and their record.
//   - statusView (statusview.go, backend.go, verify.go, rolls.go): what
//     the metrics already hold (the scrape's alone), the roll journal,
//     the reload's warnings.
//   - connector (connect.go): the alternation of the keys offered to the
//     speaker's connects.
//   - core: policyState, the policy in force, swapped whole by SetPolicy;
//     snapshots, the shared key snapshot under its lock.

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
