// Package bgp is aokeyd's view of the BGP speaker that owns the TCP sockets:
// its peers and their sessions (Speaker, implemented for GoBGP v3 and v4
// by bgp/gobgp and for FRR 10 by bgp/frr), the sockets behind them (bgp/sockets), the wiring of sessions
// to their consumer (Tracker calls a SessionObserver; aokeyd's daemon
// implements it and runs the rotation) and the session health guard around
// rotation steps (Guard). Which neighbors carry TCP-AO is the caller's
// business (TrackerOptions.Managed): the package knows nothing of the
// policy.
//
// # How keys reach the speaker's connections
//
// aokeyd works from outside an unmodified speaker. A TCP-AO key must be on a
// socket before its SYN is sent or received: aokeyd puts the keys on the
// speaker's listening sockets, and connections the speaker accepts inherit
// them. gobgpd v3 offers no hook between socket() and connect() of its
// outgoing connections, so either AO neighbors are configured in gobgpd with
//
//	[neighbors.transport.config]
//	  passive-mode = true
//
// and the remote side opens the connection, or the speaker runs under
// `aokeyd exec`, whose connect interception puts the keys on each outgoing
// socket before its SYN (TrackerOptions.ActiveOpens: such sessions are
// followed like accepted ones). aoctl status warns about a neighbor that is
// neither passive nor keyed on its active opens. A neighbor with a TCP-MD5
// auth-password (PeerInfo.MD5) cannot also carry TCP-AO keys: the kernel
// refuses TCP-AO next to TCP-MD5 on one socket (EKEYREJECTED); the daemon
// refuses to manage its session and says how to fix it. Speakers: GoBGP v3
// (bgp/gobgp, gRPC with an event stream) and FRR 10 (bgp/frr, bgpd's vty
// socket, polled).
//
// # Speakers that key their own sockets
//
// Borrowing a speaker's sockets is right for speakers that cannot key
// TCP-AO themselves (gobgpd v3 and v4.8, FRR 10). A speaker that can
// (BIRD 2.17+ with `authentication ao`, GoBGP 4.10+ keychains) owns the
// keys on its sockets: aokeyd must not write them, and never deletes what
// it did not install (the daemon's ownership record: such keys are
// foreign, kept and reported). Such a speaker is not a Speaker: it is
// driven by an executor beneath the daemon's pass (internal/daemon's
// Executor; BIRD's is internal/birdnative): the pass plans each peer's
// key list, with the key to prefer and the keys to deprecate, the
// executor applies it through the speaker's own interface (BIRD: an
// include file checked with bird -p and birdc configure; GoBGP 4.10, when
// served: its keychain RPCs) and reads the sockets back (GET_KEYS, INFO),
// never writing them. Speaker stays as it is for the speakers whose
// sockets aokeyd keys.
//
// # Established sessions and the del_async race
//
// When a followed peer reaches Established the Tracker finds its socket
// (4-tuple lookup in the speaker's process) and calls
// SessionObserver.OnEstablished with a handle to it. The observer must
// compare the socket's key set (TCP_AO_GET_KEYS) with the desired one
// before it starts rotating: a key deleted from the listener with del_async
// moments before may still have been copied to an accepted socket. When the
// session drops, OnDown says to stop touching its socket.
//
// # Session health
//
// The guard asks a PeerQuerier about the one neighbor of the step, each
// question bounded by its own timeout. The daemon hands it the Tracker,
// which answers from the session state it follows on the speaker's event
// stream when it can vouch for it (stream synced and not lost since
// (EventLost), every delivered event applied, the session confirmed by the
// last sync or a later event) and otherwise asks the speaker about that
// neighbor alone (Speaker.Peer; for GoBGP a ListPeer with its address). A
// roll thus costs the speaker no RPC while its stream is healthy, its cost
// never grows with the number of neighbors, and a slow answer about one
// holds up no other. A drop reaches the guard as the event that takes the
// session out of the cache (the next question then goes to the speaker),
// or as a session back on another connection (other ports).
// Guard.Step runs one rotation step on a peer only while it is Established,
// and checks afterwards that the session stayed up: the same uptime, the
// same flop count and the same connection (ports). A drop is returned as a
// *DropError naming the step (errors.Is ErrSessionDropped); a step that
// Before refuses wraps ErrNotEstablished. The rotator aborts the roll,
// classifies it by which of the two failed and keeps the error for
// errors.Is/As, and backs off.
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
