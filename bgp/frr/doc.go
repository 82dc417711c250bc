// Package frr implements bgp.Speaker for an unmodified FRR bgpd (FRR 10.x)
// through vtysh, FRR's own command shell, the interface every FRR install
// has and FRR keeps stable for its JSON output.
//
//   - Peers and Peer read `show bgp vrf all neighbors json` (Peer asks for
//     the one neighbor: `show bgp vrf VRF neighbors ADDR json`, so its cost
//     does not grow with the number of neighbors). The JSON is outside input:
//     it is decoded strictly into the few fields aokeyd needs and any
//     malformed neighbor is an error naming it.
//   - Watch polls. vtysh has no event stream, and FRR's northbound
//     (mgmtd/gRPC) has no operational-state notifications for BGP sessions
//     in FRR 10; its log is free-form text that changes between releases.
//     Watch lists every neighbor each Options.PollInterval (default 1s):
//     the first list is an EventSync, a changed session is an EventState.
//     A session event reaches aokeyd at most PollInterval plus one vtysh
//     round trip after bgpd changed state (about 1.1s with the default;
//     kernel-side safety does not depend on it: keys are on the listener
//     before any SYN, and the session guard asks bgpd itself around every
//     step). A failed vtysh call is an EventLost; the next good one an
//     EventSync.
//   - ResetPeer is `clear bgp vrf VRF ADDR` (a hard reset; FRR's clear
//     takes no Cease message, so the reason is only logged).
//   - PID reads bgpd's pid file (default /run/frr/bgpd.pid), else finds the
//     one process named bgpd.
//
// FRR reports a session's start as bgpTimerUpEstablishedEpoch, computed on
// every call as wall-clock now minus monotonic uptime in whole seconds: it
// may move by a second between two calls for one session. The Speaker keeps
// the first reading of each connection (neighbor, connectionsEstablished and
// ports) so that PeerInfo.Uptime only changes when the session does; the
// session guard compares it exactly.
//
// FRR has no TCP-AO. A neighbor with FRR's `neighbor ... password` (TCP-MD5)
// sets PeerInfo.MD5 (FRR's JSON says authenticationEnabled, never the
// password): the kernel refuses TCP-AO next to TCP-MD5 on one socket, and
// aokeyd refuses to manage such a neighbor, naming it and the fix (`no
// neighbor ADDR password`). PeerInfo.Passive comes from `show
// running-config bgpd` filtered by vtysh itself (`| include`) to the router
// and passive/peer-group lines, so no password line reaches aokeyd; each
// full listing re-reads it, Peer reuses the last one.
//
// Active opens: bgpd connects to neighbors that are not `passive`. Run it
// under aokeyd's connect interception with FRR's per-daemon wrapper in
// /etc/frr/daemons:
//
//	bgpd_wrap="/usr/sbin/aokeyd exec -socket /run/aokeyd/connectguard.sock --"
//
// watchfrr then starts (and restarts) bgpd as `aokeyd exec ... -- bgpd ...`
// and aokeyd (run with -connectguard) keys every connect before its SYN.
package frr
