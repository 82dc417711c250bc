// Package frr implements bgp.Speaker for an unmodified FRR bgpd (FRR 10.x)
// through bgpd's vty socket (bgpd.vty in FRR's run directory), the socket
// FRR's own shell vtysh talks to: the same commands and JSON output as
// `vtysh -c`, without starting a vtysh per command (VtySocket; any Runner
// may stand in). FRR's northbound (mgmtd, gRPC) is not used: in FRR 10 it
// offers no BGP session state notifications either, and needs an extra
// daemon and module.
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
//     round trip after bgpd changed state (about 1s with the default;
//     kernel-side safety does not depend on it: keys are on the listener
//     before any SYN, and the session guard asks bgpd itself around every
//     step). On the guest VM's emulated CPU one command takes a few
//     milliseconds. A failed call is an EventLost; the next good one an
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
// running-config` (neighbor passive and peer-group lines; bgpd's vty has no
// output filter, vtysh's `| include` is vtysh's own): that text holds
// TCP-MD5 passwords, so it is parsed as bytes, nothing of a password line is
// kept and every buffer that held it is zeroed. Each full listing re-reads
// it, Peer reuses the last one.
//
// Active opens: bgpd connects to neighbors that are not `passive`. Run it
// under aokeyd's connect interception with FRR's per-daemon wrapper in
// /etc/frr/daemons and the wrapper script docs/frr-bgpd-wrap.sh:
//
//	bgpd_wrap="/usr/local/sbin/frr-bgpd-wrap"
//
// FRR's init script and watchfrr start (and restart) bgpd as "$wrap bgpd -d
// ..." and expect the command to return once bgpd is up; `aokeyd exec` must
// stay bgpd's parent (it holds the connect filter's listener), so the script
// drops -d, runs `aokeyd exec -- bgpd ...` in the background and returns
// when bgpd's vty socket listens. A wrapper that returned at once made
// watchfrr count a bgpd that was still starting as a failed restart and
// stop it. aokeyd (run with -connectguard on the same socket) keys every
// connect before its SYN. Every connect() of bgpd waits for aokeyd's
// supervisor, its connect to zebra's unix socket at start included (even
// with -Z): start aokeyd first. When bgpd dies, watchfrr restarts it through
// the same wrapper; aokeyd finds the new process by its pid file
// (/run/frr/NAME/bgpd.pid for a pathspace NAME), keys its new listener and
// fetches the new launcher's filter (integration/frr TestFRRWatchfrr).
package frr
