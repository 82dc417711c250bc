package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Executor carries the pass's per-peer key lists to a speaker that keys
// its own sockets (Caps.KeysOwnSockets: BIRD, birdnative.Executor), where
// the rotation controller carries them to the sockets aokeyd borrows. The
// pass plans each peer's list with the rotator's planner on what Observe
// reports (rotator.PlanSocket, and rotator.RetireProof on the session's
// counts: the one retire rule, roll.pml's executor end) and hands the plans
// to Submit; Run applies them beside the pass. Observe and Submit never
// wait on the speaker: whatever waits (the speaker's own check of its
// configuration, its reconfigure, the read-back of its sockets) runs in
// Run, and a revoke's wait for clean sockets in Clean, never in the pass.
// Issue 50 item 1, docs/wip/birdexec.md; GoBGP's keychains, when a
// module with them is served, would be another Executor.
type Executor interface {
	// Name is the speaker kind's ("bird").
	Name() string
	// Observe reports each peer's key list as the speaker holds it: the
	// list written for it as a socket's (its Current_key and RNext_key:
	// the preferred key), the session's keys from the kernel (read only),
	// and the speaker's last report of the peer's protocol (as Run last
	// read it). Files and the kernel only: it does not ask the speaker.
	Observe(ctx context.Context, peers []peer.Key) map[peer.Key]ExecObserved
	// Submit replaces the pending plan of each peer it names (the latest
	// wins, as rotator.Controller's mailbox) and returns at once. The
	// plans' secrets are the executor's own (copies): it zeroes each plan
	// (ExecPlan.Zero) once applied or replaced.
	Submit(plans []ExecPlan)
	// Clean reports the peers whose sockets (the speaker's listeners and
	// its sessions with them) still hold ref after a bound: a revoke's
	// check, which waits in the revoke's own goroutine, never the pass.
	Clean(ctx context.Context, peers []peer.Key, ref tcpao.KeyRef) (dirty map[peer.Key]bool, err error)
	// Run applies the submitted plans until ctx ends: every changed list
	// checked by the speaker, all written, one reconfigure, every list put
	// back when the speaker refuses, then the sessions read back. done
	// reports each outcome (and kicks the next pass, which publishes it).
	Run(ctx context.Context, done func(ExecOutcome)) error
}

// ExecObserved is what an Executor's Observe reports of one peer.
type ExecObserved struct {
	// Written is the peer's list as a socket (rotator.Observed): its keys
	// with their material's fingerprints, the preferred one Current_key
	// and RNext_key. HaveAO false: nothing written yet.
	Written rotator.Observed
	// Session is the speaker's established session with the peer as the
	// kernel reports it (pkt_good per key); nil when there is none, or
	// when it could not be read (Unread says why).
	Session *rotator.Observed
	// Unread: the speaker's sessions could not be read (its process not
	// found, its socket not borrowed); no key the peer may use leaves.
	Unread error
	// Protocol is the speaker's report of the peer's protocol (nil: none).
	Protocol *bird.Protocol
	// Where names the peer's list for the operator ("bird FILE"): a
	// revoke's result, status ("": the executor's name and the peer).
	Where string
	// Warnings are the problems found reading the list (a file that is
	// not the executor's form, not a regular file): shown in status.
	Warnings []string
}

// ExecPlan is one peer's plan for an Executor.
type ExecPlan struct {
	Peer peer.Key
	// Plan is rotator.PlanSocket's for the written list (ExecObserved's
	// Written) with the retire proof applied (Desired.Retire).
	Plan rotator.SocketPlan
	// Keys are the peer's desired keys (policy.PeerKeys.Keys, revocations
	// applied) and Preferred the index of the one to send with (-1: none
	// may be sent with now; the written preferred one keeps sending).
	Keys      []policy.ScheduledKey
	Preferred int
	// Revoked are written keys that leave whatever the plan kept (an
	// operator's revoke: the speaker names its own replacement).
	Revoked []tcpao.KeyRef
	// Gen is the pass's generation, echoed in the outcome.
	Gen uint64
	// Revoke: a revoke's plan, applied even within the backoff that
	// follows a reconfigure the speaker refused (a revoke waits for no
	// retry).
	Revoke bool
}

// own gives p its own copy of every secret it holds: its keys' material
// shares the pass's key snapshot, which is zeroed once replaced, and the
// executor applies the plan later. The executor owns the copies (Zero).
func (p *ExecPlan) own() {
	p.Keys = slices.Clone(p.Keys)
	for i := range p.Keys {
		p.Keys[i].MKT = p.Keys[i].MKT.Clone()
	}
	p.Plan.Ops = slices.Clone(p.Plan.Ops)
	for i := range p.Plan.Ops {
		p.Plan.Ops[i].Key.Secret = p.Plan.Ops[i].Key.Secret.Clone()
	}
}

// Zero wipes the secrets p holds: the executor's, once it applied p or a
// later plan replaced it.
func (p ExecPlan) Zero() {
	for _, k := range p.Keys {
		k.MKT.Secret.Zero()
	}
	for _, op := range p.Plan.Ops {
		op.Key.Secret.Zero()
	}
}

// ExecOutcome is what one Run application did.
type ExecOutcome struct {
	Gen uint64
	// Failed are the peers whose list the speaker refused to check, each
	// with why (their lists are left as they were).
	Failed map[peer.Key]error
	// ConfigureErr: the reconfigure failed; every list of the
	// application was put back (nil: applied, or nothing to apply).
	ConfigureErr error
	// Warnings are what the read-back found, by peer (a session that does
	// not carry its list's keys after the reconfigure), for status.
	Warnings map[peer.Key][]string
	// Timing is how long the check and the reconfigure took.
	Timing time.Duration
}
