// Package activeopen is the guest-VM proof of issue 9 (connectguard): two
// gobgpd v3.37 routers in network namespaces, each started through the
// connectguard launcher with its own supervisor process (this test binary in
// the "ao-supervisor" role, keys from a keystore YAML file), establish a BGP
// session over TCP-AO where the SYN carries keys that only the supervisor can
// have put on gobgpd's connecting socket.
//
// TestGuestActiveOpen, in order:
//  1. B is the only side that can open (only A's listener has keys): B's
//     supervisor is killed (SIGKILL) while gobgpd B keeps retrying, its
//     connect waits (a gobgpd thread sits in connect inside seccomp, no
//     session), a new supervisor is started and the session comes up with
//     B's socket connected to port 179 (B opened it actively, keyed by the
//     supervisor), keys on both sockets and pkt_good rising.
//  2. gobgpd A's BMP connect to a collector in B's namespace (port 11019)
//     is continued untouched: the collector accepts it and the socket has
//     no TCP-AO.
//  3. B is restarted passive with keys on its listener: the session comes
//     back through A's active open, keyed by A's supervisor.
//
// TestGobgpdListenGuard is the proof of the listen guard with the real
// daemon: gobgpd under `aokeyd exec`, aokeyd with -connectguard and its
// neighbor's key in the key file; unsigned SYNs from the neighbor's
// address, in a tight loop from before gobgpd starts until well after its
// listener exists, are never taken (refused while nothing listens, dropped
// by the keyed listener), and the signed session comes up.
//
// Run: integration/vm/run.sh ./integration/activeopen with gobgpd and
// aokeyd in AOKEYD_GUEST_BINS (see integration/tools/guest-bins.sh).
package activeopen
