// Package rotator is aokeyd's hitless TCP-AO key-rotation engine.
//
// It has three layers:
//
//   - The planner (PlanSocket, Plan) is a pure function from the keys a
//     socket should carry (Desired, written by the caller, usually converted
//     from policy output) and what the kernel reports (Observed, from
//     TCP_AO_INFO and TCP_AO_GET_KEYS) to an ordered list of operations
//     (Op). It never does anything unsafe on its own: adds come before
//     deletes, deletes on listeners are del_async and synchronous elsewhere,
//     the Current_key of an established socket is only ever deleted by a
//     forced delete that names its replacement (revoked keys and in-place
//     secret changes only; an in-place change names only a key the peer
//     was seen to use, pkt_good > 0, so installing a key never switches
//     to one the peer may lack), and a stale key that is still current is
//     deferred rather than deleted. On an established socket keys are
//     matched by IDs, L3 device and material, not by prefix: a session
//     under a prefix binding carries the listener's keys with the
//     binding's prefix, and those are its desired keys. Plans render as
//     stable text (Render).
//
//   - The executor (Apply, Observe) runs a plan against a tcpao.Socket.
//
//   - The per-peer state machine (Controller) performs the timed part of a
//     roll on each established session: install the new key, announce it
//     with RNext, wait until the peer is seen sending with it (or its
//     RNext made the kernel switch Current_key to it: a switch aokeyd's
//     own writes caused is no such proof, and is undone when the peer was
//     never seen with the key), make it
//     current, and after a grace period, once the old key's pkt_good has
//     stopped rising, delete the old key. If the peer never switches it puts
//     RNext back, records why, and retries later. One goroutine owns each
//     peer socket; clock and randomness are injected. Producers never
//     wait for it: SetDesired leaves the new desired state in the peer's
//     mailbox (the latest value wins) and wakes the goroutine, which takes
//     it between two steps; Status reads the snapshot each goroutine
//     publishes (after each step, and before a guard or kernel call that
//     may block, naming what it waits for in Status.Waiting). A stuck call
//     for one peer delays that peer alone, and no caller: PeerDown
//     stops the goroutine without waiting for it (its returned channel
//     closes once the socket is no longer touched), Accepted hands the
//     wait for a previous goroutine still in a step to the new one, and
//     Exclusive runs a function on the socket between two steps, giving
//     up when its context ends before the goroutine took it. The
//     SessionGuard gets the goroutine's context, which ends when it is
//     stopped.
//
// Listening sockets are synchronised with SyncListener, which batches the
// work per peer (ListenerBatches) so that a fleet-wide rotation holds twice
// the keys only for a batch at a time, and checks the key set against
// net.core.optmem_max first (CheckOptmem).
//
// Kernel facts this package relies on (Linux 6.12 net/ipv4/tcp_ao.c): RNext
// is what we ask the peer to send with (a RecvID); the peer's RNextKeyID in
// segments we receive switches our Current_key to the key with that SendID;
// a key's pkt_good counts segments verified with it; current/rnext cannot be
// set on a listener; del_async is only valid on a listener and returns
// before the key is freed, so accepted sockets are checked (Accepted).
package rotator
