// Package daemon is aokeyd's controller glue: it ties the key source
// (keystore.Cache), the rotation policy, the BGP speaker's sessions and
// sockets (bgp.Tracker) and the rotation engine (rotator.Controller)
// together, and serves the control API (control.Backend).
//
// Reconciliation follows the controller pattern: every pass re-reads the
// kernel's state of each managed socket, a pure planner turns (desired,
// observed) into an ordered plan, and one writer applies it. The listening
// sockets are written only by the reconcile goroutine; each established
// session only by its own rotator goroutine.
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
