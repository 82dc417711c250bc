package daemon

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
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

// reconciler is the reconcile goroutine's state. The fields above mu are
// that goroutine's alone (no lock); the counters are atomic; mu guards
// what other goroutines read.
type reconciler struct {
	kick    chan struct{}        // wake: a pass now
	revokes chan *listenerRevoke // a revoke's listener part, applied between passes
	listens chan *listenAsk      // a socket held in listen(2) to key (listen.go)
	done    chan struct{}        // closed when Run returns

	// events counts the requests for a full pass with recompute that no
	// version records: Kick (SIGHUP reload, aoctl rotate and revoke, a key
	// refresh asked for). sessions counts what needs a full pass but no
	// recompute: a speaker (re)sync, a session not taken over yet.
	events, sessions       atomic.Uint64
	idlePasses, fullPasses atomic.Uint64
	// trackerSynced: the tracker has reported the speaker's full peer
	// list at least once since the start.
	trackerSynced atomic.Bool
	// gate is the start-up gate's state while it holds, nil once it
	// opened (gate.go).
	gate atomic.Pointer[control.StartUpGate]

	// The inputs of the last full pass, when it ran, and the listeners'
	// desired keys it computed (owning their secrets).
	last         passInputs
	lastSessions uint64 // sessions at the last full pass
	haveLast     bool
	lastFull     time.Time
	lastCost     time.Duration // how long the last full pass took (paces the next: pace)
	want         listenerWant
	md5          md5Want       // the listeners' TCP-MD5 passwords
	md5Ever      bool          // a binding had a TCP-MD5 password: read the listeners' MD5 keys
	frozen       []frozenRange // bindings whose listener keys are not deleted
	retry        bool          // some desired state failed: recompute at the next full pass
	raised       raiseState    // the last RaiseOptMem outcome
	// allRead: since the start, every session up has been read from the
	// kernel once (sessionsRead); until then no listener key is deleted.
	allRead bool
	// down keeps the bases of the listener keys no session up carries
	// (rotator.DownWatch: an edit in place of a key whose peer is down and
	// fails against it takes effect).
	down rotator.DownWatch
	// asks are the sockets held in listen(2) that arrived before the first
	// full pass: its listener sync keys them (listen.go).
	asks []*listenAsk

	mu       sync.Mutex
	nextPass time.Time         // the policy's next time boundary
	optmem   optMemUse         // the listeners' optmem need at the last sync
	kept     []rotator.Held    // what the last listener sync kept
	md5Held  []rotator.MD5Held // TCP-MD5 keys the last listener sync held
	// faults are the listeners the last listener sync that found the
	// listeners (or a Multipath TCP one) could not key (mptcp.go).
	faults []control.ListenerFault
	// editsHeld are the edits in place the last listener sync held back,
	// editsApplied those the syncs applied, while the listeners' desired
	// state holds their material (edits.go).
	editsHeld, editsApplied []rotator.Edit
}

func newReconciler() reconciler {
	return reconciler{kick: make(chan struct{}, 1), revokes: make(chan *listenerRevoke), listens: make(chan *listenAsk), done: make(chan struct{})}
}

// listenerWant is the listeners' desired state per address family.
type listenerWant struct{ v4, v6 rotator.Desired }

// optMemUse is net.core.optmem_max as the listener sync saw it and what
// the listener with the most keys needs.
type optMemUse struct{ limit, needed int }

// peerTable holds what the speaker reported of each peer. A *peerState is
// never modified once published (update replaces it).
type peerTable struct {
	mu       sync.Mutex
	m        map[rotator.PeerID]*peerState
	connects connectTries // ConnectKeys' alternation per peer
}

// operatorAsks are operator requests the passes apply.
type operatorAsks struct {
	// early are aoctl rotate's rolls to a key ahead of its send start
	// (early.go), under their own lock.
	early earlyRolls

	mu       sync.Mutex
	approved map[string]material // aoctl replace: edits in place approved, by chain/key
	// md5Approved are TCP-MD5 password changes approved (aoctl replace
	// --md5), by peer prefix: the password approved, by fingerprint.
	md5Approved map[netip.Prefix]tcpao.Fingerprint
}

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

// scrapeView is what the metrics hold of each peer, so that a scrape
// updates only what changed: observeMetrics's alone, but for verify
// (session events note bases). The roll's state and counts are not here:
// the rotator's events publish them (rollEvent).
type scrapeView struct {
	scraped map[*peerState]*scraped
	scrapes uint64 // observeMetrics passes
	verify  verifyBase
	// contact are the peers never up whose verify gauges the last scrape
	// published (they have no peer state).
	contact map[rotator.PeerID]bool
}
