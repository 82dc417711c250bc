// Package bgp is aokeyd's view of the BGP speaker that owns the TCP sockets:
// its peers and their sessions (Speaker, implemented for GoBGP v3 by
// bgp/gobgp), the sockets behind them (bgp/sockets), the mapping of
// neighbors to the policy's peer bindings (Inventory), the wiring of
// sessions into the rotator (Tracker, SessionObserver) and the session
// health guard around rotation steps (Guard).
//
// # Passive mode: how keys reach the speaker's connections
//
// aokeyd works from outside an unmodified speaker. A TCP-AO key must be on a
// socket before its SYN is sent or received: aokeyd puts the keys on the
// speaker's listening sockets, and connections the speaker accepts inherit
// them. gobgpd v3 offers no hook between socket() and connect() of its
// outgoing connections, so those cannot carry keys. AO neighbors are
// therefore configured in gobgpd with
//
//	[neighbors.transport.config]
//	  passive-mode = true
//
// and the remote side opens the connection (active opens are a later issue).
// Inventory marks an AO neighbor that is not passive with a warning that
// aokeyd's status shows. A gobgpd neighbor with an auth-password (TCP-MD5)
// that also has an AO binding is a configuration error (ErrMD5AndAO): the
// kernel refuses TCP-AO keys next to TCP-MD5 on one socket (EKEYREJECTED).
//
// # Accepted sessions and the del_async race
//
// When a peer reaches Established on an accepted connection the Tracker
// finds that socket (4-tuple lookup in the speaker's process) and calls
// SessionObserver.OnEstablished with a handle to it. The observer (the
// rotator) must compare the socket's key set (TCP_AO_GET_KEYS) with the
// desired one before it starts rotating: a key deleted from the listener
// with del_async moments before may still have been copied to the accepted
// socket. When the session drops, OnDown says to stop touching its socket.
//
// # Session health
//
// Guard.Step runs one rotation step on a peer only while it is Established,
// and checks afterwards that the session stayed up: the same uptime, the
// same flop count and the same connection (ports). A drop is returned as a
// *DropError naming the step, so the rotator can record it and back off.
//
// # Privileges
//
// Socket discovery borrows the speaker's descriptors with pidfd_getfd:
// aokeyd running as the same uid as gobgpd with no capabilities works;
// otherwise it needs CAP_SYS_PTRACE (and every capability gobgpd holds, e.g.
// CAP_NET_BIND_SERVICE when gobgpd has it). Entering gobgpd's network
// namespace, when it differs from aokeyd's, needs CAP_SYS_ADMIN. See
// bgp/sockets.
package bgp
