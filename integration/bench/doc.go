// Package bench measures aokeyd's cost of managing TCP-AO keys on one
// listening socket at scale, next to the cost of the leanest possible raw
// setsockopt loop measured in the same process and the same kernel, and
// renders the results as a text table and a data file (`make bench`).
//
// The measuring half (Run, Linux only) needs the real TCP-AO kernel and runs
// inside the integration VM; it writes Results as JSON (WriteResults). The
// rendering half is portable and runs on the host: WriteTable writes the
// table (report.txt), WriteData every figure as tab-separated values
// (report.tsv, one Point a row), and package chart draws the chart
// (report.png) from the same Results.
//
// The package sits under integration/ because it is a harness, not part of
// aokeyd: it stands its daemon fleets up with integration/lab (binaries,
// waits on real time) and drives the production packages from outside.
// Nothing under internal/ imports integration/ (make lint checks), so the
// import graph points from the harness to the machinery, never back.
//
// What is compared, for N peers (one /32 MKT each) on one listener:
//
//   - Install: rotator.SyncListener on an empty listener versus a loop of
//     pre-built TCP_AO_ADD_KEY requests.
//   - Rotation: rotator.SyncListener moving every peer to a key with new
//     IDs (add new, del_async old, 64 peers per batch) versus the best raw
//     ordering: per peer add-new then del_async-old, most recently installed
//     peer first, so each delete finds its key near the head of the kernel's
//     key list.
//   - Deletes: the same aokeyd plan applied op by op once with del_async and
//     once with synchronous deletes (a sample, extrapolated: a synchronous
//     drain waits for an RCU grace period per key).
//   - Start-up: the install at the largest N, with net.core.optmem_max needed
//     versus available and the real ENOMEM boundary under the default limit.
//   - Planner: rotator.PlanAll alone (testing.Benchmark) at several fleet
//     sizes, next to rotator's own BenchmarkPlan output.
//
// The daemon items run the real daemon package (daemon.New) over a fleet of
// real loopback TCP-AO sessions: a listener on 127.0.0.1 and one client per
// peer bound to its own 127.16.x.y address and keyed before connect, with a
// fake speaker reporting the sessions Established and a fake discoverer
// naming the accepted sockets, reached through daemon.Options.SocketOf:
//
//   - Emergency revoke: `aoctl revoke core/k1` executed against
//     control.NewServer on a unix socket, timed from exec to exit, then
//     every socket is read back and every session carries a byte each way.
//   - Daemon memory and idle pass: RSS with the daemon running
//     over N peers of K keys (listener and established sockets), and
//     getrusage CPU per reconcile pass with nothing to change.
package bench
