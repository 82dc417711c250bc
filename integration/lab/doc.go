// Package lab is the one harness of the scenario tests and the bench: what
// integration/gobgp, integration/activeopen, integration/e2e and the bench
// each need to stand up real routers in network namespaces and to wait on
// them.
//
//   - Waiting on something real (a kernel, a gobgpd, a BIRD, a daemon
//     process): Poll and Wait (an error, a *TimeoutError when time runs
//     out), Eventually (the same, failing the test) and Within (the same,
//     returning the timeout). Every wait on real time in the integration
//     tests goes through these, so each has a name, a bound and the last
//     state seen when it runs out; host unit tests do not wait on real time
//     at all (they use testing/synctest).
//   - Finding binaries: Bin and MustBin (PATH, where the VM harness puts
//     what AOKEYD_GUEST_BINS names), GobgpdBin (gobgpd v3.37 from
//     $AOKEYD_GOBGPD, the cache integration/tools/gobgpd.sh installs into,
//     or PATH).
//   - Two routers' hosts: Pair makes two network namespaces joined by a
//     veth pair (package netns does the namespaces themselves); DialFrom
//     connects from inside one.
//   - gobgpd: GobgpdConfig writes its TOML, StartGobgpd runs it (directly
//     or under a launcher such as connectguard's or `aokeyd exec`) with its
//     API on a unix socket and dials it as a bgp.Speaker; WaitPeer waits
//     for a neighbor's state.
//   - aokeyd: StartAokeyd runs the daemon's binary in a namespace and
//     waits for its control socket.
//   - Observer records what a bgp.Tracker hands over.
//   - LogFile: a process's log, whose tail is printed when the test fails.
//
// The import graph points one way: lab uses netns, kerneltest and the
// production packages (bgp, bgp/gobgp, bgp/sockets, internal/control);
// integration/bird, integration/bench and the test packages use lab; lab uses
// none of them.
package lab
