// Package daemon is aokeyd's controller glue: it ties the key source
// (keystore.Cache), the rotation policy, the BGP speaker's sessions and
// sockets (bgp.Tracker) and the rotation engine (rotator.Controller)
// together, and serves the control API (control.Backend).
//
// The daemon is made of parts, each the one owner of its state with its
// own type and methods (state.go lists them): the reconciler (the passes,
// the listener syncs, TCP-MD5 on the listeners, the keys the sessions
// carry), the peer table (the speaker's sessions and their events), the
// revocation service, the ownership ledger (with adopt and replace), the
// migration controller (beside internal/migrate), the status and metrics
// view, the early rolls (aoctl rotate) and the connector (the speaker's
// connects). They share a core (core.go: options, logger, controller,
// tracker, policy, key snapshot) and use each other through methods only.
// Daemon is the wiring: New builds the parts, Run starts their goroutines
// in order under it, and its entry points (control.go) hand each request
// to the part that owns what it touches.
//
// Reconciliation follows the controller pattern: every pass re-reads the
// kernel's state of each managed socket, a pure planner
// (rotator.PlanSocket) turns (desired, observed) into an ordered plan, and
// one writer applies it.
//
// # Where a roll starts
//
// A roll starts here, not in rotator: the reconcile pass computes each
// peer's desired keys from the policy and hands them to the controller,
// whose per-peer machine rolls to them. A scheduled roll:
//
//   - daemon.go Run: the key-source goroutine reads the source (core.go
//     refresh)
//     and wakes a pass; or the policy's next time boundary (a key's send
//     lifetime starting) fires the pass's timer.
//   - reconcile.go reconciler.reconcile (run from reconciler.go run,
//     the reconcile goroutine): inputs or boundary changed, so a full pass;
//     for each established peer desiredFor (policy.Policy.Desired picks
//     the preferred key at now; internal/desired.Socket builds the
//     rotator.Desired) and rotator.Controller.SetDesired, which posts it
//     to the peer's mailbox (latest wins) when it changed.
//   - rotator/controller.go loop: the peer's goroutine takes the mailbox
//     (runner.take, machine.setDesired) and steps: machine.go step (one
//     read, rotator.Observe, full or bare) and steady (PlanSocket; the
//     attempt's EventRollStarted), install.go install (the new key, RNext
//     to it, each write read back in the same borrow: machine.writeRead),
//     machine.go await (the peer's Current_key moves), retire.go toGrace
//     and retire (the old key goes once the peer sends with the new one;
//     EventRollCompleted, or EventRollAborted from machine.go abort).
//     Each step is bracketed by the SessionGuard: daemon.go stepGuard
//     → bgp/guard.go Guard.Before/After → bgp/tracker.go (the session is
//     still up, asked of the speaker only when the tracker cannot vouch).
//   - The listeners: the same pass's listenerWant (listenerDesired) and
//     syncListeners (listenerWantOf per listener, rotator.SyncListener),
//     after the sessions'. A listener the speaker opens later is seen by
//     the listener watch (lwatch.go: a sock_diag listing every
//     ListenerPoll), which asks for that pass at once.
//
// An `aoctl revoke`: cmd/aoctl revoke.go → control POST /v1/revoke
// (internal/control server.go revoke) → Daemon.Revoke → revoke.go
// revocations.request and revoke: revokeTarget;
// revocation.Store.Add records it first (internal/revocation);
// revokeSockets asks the reconcile goroutine for the listener part
// (revokelisteners.go askListenerRevoke; the reconciler's run serves it
// with revokeListeners between two passes) and takes the key off each
// session through its own machine (revokePeer →
// rotator.Controller.Exclusive, which runs revokeOn between two steps:
// one forced TCP_AO_DEL_KEY naming the replacement); the key source is
// marked; the reconciler's askFull (Kick) runs a full pass that
// recomputes every desired state without the key.
//
// # One owner for each piece of state (state.go)
//
//   - Each peer's desired keys and whether a machine runs on its session:
//     the rotator.Controller (SetDesired, Adopt, Exclusive are its only
//     writers; its machines take their copy from it). The daemon keeps no
//     copy.
//   - Each session's socket: its machine's goroutine alone (an Exclusive
//     call runs inside it).
//   - The pass inputs, the listeners' desired keys and the listening
//     sockets: the reconciler, on the reconcile goroutine (its run). A
//     revoke asks it (askListenerRevoke), the listen guard too
//     (listenKeys); nothing else writes a listener. The keys the sessions
//     carry (carried.go) and the listener watch are its too.
//   - What the speaker reported of each peer: the peerTable, written by
//     the session events it handles (OnEstablished, OnDown) and the pass's
//     forget (remove).
//   - The recorded revocations: the revocations part, their one writer.
//   - Which installed keys are aokeyd's, and aoctl replace's approvals:
//     ownership (its ledger; adopt and replace). The migrations: the
//     migrations part (its migrate.Store). aoctl rotate's early rolls:
//     earlyRolls. The policy: policyState in the core, swapped whole
//     (SetPolicy).
//   - What the metrics hold: the statusView (the scrape's), for the socket
//     counters and key IDs; the roll's attempts, outcomes and state come
//     as the rotator's events (rotator.Options.Events → backend.go
//     rollEvent), never rebuilt from snapshots.
//   - Daemon holds no state: it is the wiring (daemon.go, control.go),
//     with at most 25 methods (parts_test.go).
//
// A peer is a bgp/peer.Key (address and VRF) everywhere: the tracker, the
// guard, the rotation controller (rotator.PeerID is that key) and every
// per-peer map here; it becomes text only in logs, socket names, the
// control API's JSON and metric labels.
//
// Safety rules the daemon keeps:
//   - Never strand a session: rotator.PlanSocket's one rule (mayRemove)
//     keeps every key a session uses, or its peer last authenticated with,
//     on the session and on the listener until an operator removes it; the
//     listener syncs pass the planner the keys the sessions carry
//     (rotator.Controller.Carried), ConnectKeys offers them to the
//     speaker's own connects, and what the rule keeps is warned (kept.go).
//   - Without a good key snapshot nothing is touched: an unreachable or
//     failing key source never deletes a key (keystore.Cache keeps the last
//     good snapshot in force).
//   - A successful read that loses keys changes nothing installed: the
//     key cache holds back the last good version of what it lost, and a
//     chain it cannot make up for (missing, or degraded after a restart)
//     freezes its bindings: nothing of theirs is deleted or switched
//     (lossy.go).
//   - On SIGTERM the daemon leaves every installed key in place; a restart
//     rebuilds its view from the kernel (GET_KEYS/INFO) and resumes.
//   - The speaker's sockets are borrowed one call at a time through
//     pidfd_getfd and the duplicate is closed at once (bgp.SocketHandle), so
//     aokeyd never keeps a socket of gobgpd alive.
//   - Revocations are recorded in a state file before they are applied, so
//     a restart does not re-install a revoked key, and marked in the key
//     source so other routers learn of them.
package daemon
