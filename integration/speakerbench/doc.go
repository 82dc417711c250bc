// Package speakerbench is the real-speaker item of `make bench`: gobgpd v3.37 with
// N passive TCP-AO neighbours plus nine baseline neighbours, BIRD 2.17 with
// N+9 protocols from as many source addresses on the far side, and the
// aokeyd binary managing gobgpd's sockets, all in the TCP-AO guest.
//
// Its one test, TestFleet, runs only when AOKEYD_FLEET_SIZES names the
// fleet sizes (integration/tools/bench.sh sets it; `make test` does not, so
// the test skips there). Per N it measures, reading the kernel itself
// through pidfd_getfd and not aokeyd's account of it:
//
//   - a scheduled roll of each baseline peer alone, one after the other
//     (the single-peer roll time is their median: one sample varied from
//     2.5 to 3.9 s between runs, as it waits twice for the peer's next
//     keepalive; every session keeps a 1 s keepalive up to 256 peers and
//     n/128 s above, 4 s at 512 and 8 s at 1,024, so that the guest's
//     routers leave aokeyd the CPU for the roll: see keepalive), then of
//     all N peers due at one instant, each from the
//     instant the key source makes the new key the one to send with (BIRD
//     is given the new key, preferred, ahead of the rolls, as its
//     operator would) until the old key is gone from the peer's
//     established socket and from gobgpd's listener, the new key current
//     ("done"; it includes aokeyd's -roll-grace);
//   - the gobgpd RPCs aokeyd issued (aokeyd_speaker_rpcs_total scraped
//     before and after), aokeyd's CPU seconds over the roll (/proc/PID/stat)
//     and its idle CPU per second;
//   - flaps (gobgpd's uptime and flop count, BIRD's `since`, per session)
//     and bad segments (TcpExt TCPAOBad in both namespaces), which must stay
//     0;
//   - `aoctl revoke` of the fleet's current key with a backup present, from
//     the command's start until no fleet socket nor the listener carries it.
//
// For each N it prints, on stdout, the line
//
//	fleet: n=N roll_ratio=X.XX rpcs_per_peer=Y.Y flaps=F pkt_bad=B revoke_ms=R
//
// Where the guest stops: the sizes are taken in order, and each size above
// 256 (`make bench` runs 64, 256, 512 and 1,024) is rolled only if the
// guest holds it. After the set-up and a
// steady window with nothing due, the bench compares the CPU the roll
// needs -- at least aokeyd's roll CPU per peer at the last size measured,
// times N -- with the CPU the guest has idle (/proc/stat over the steady
// window: what the routers' keepalives leave) within the target, 1.5
// times the last size's single-peer roll. When the need is the larger,
// aokeyd at its measured cost cannot meet the target on this guest (the
// CPU is not there), and a roll would time the
// routers' queueing as much as aokeyd: the bench prints, instead of the
// fleet line,
//
//	fleet: n=N not measured: the guest does not hold it: WHY
//
// with the figures, and tries no larger size. AOKEYD_FLEET_FORCE=1 rolls
// every size anyway (its fleet.json entry keeps why it is not held).
//
// When AOKEYD_FLEET_OUT names a directory, the bench appends the line to
// fleet.txt there and the full figures to fleet.json and keeps aokeyd's
// log; with AOKEYD_FLEET_PROFILE=1 (or cpu) too, aokeyd writes a CPU
// profile of the fleet roll and of the revoke (fleet-aokeyd-nN-w1.pprof and
// -w2.pprof; AOKEYD_CPUPROFILE, each window opened and closed by SIGUSR2),
// with AOKEYD_FLEET_PROFILE=trace an execution trace of each (-wK.trace;
// AOKEYD_EXECTRACE). The profiler then runs in the measured daemon, and
// in one binary of a before/after pair only: figures are taken without it.
//
// gobgpd's own count of the gRPC calls it served (grpc_server_started_total
// on its metrics port) is reported beside aokeyd's. AOKEYD_FLEET_AOKEYD and
// AOKEYD_FLEET_AOCTL name other binaries to measure (an older main's, for
// the before/after table): that aokeyd is never profiled, and its
// rpcs_per_peer is gobgpd's count.
//
// The bench's own reads of the kernel share the guest's two vCPUs with
// aokeyd: it keeps one sock_diag socket and gobgpd's descriptor table from
// read to read, reads each session with one TCP_AO_GET_KEYS (its keys
// carry the Current_key flag; TCP_AO_INFO only where it reports counters),
// runs its reads on a thread of their own at nice 19 (they take the CPU
// the routers and aokeyd leave, so a busy guest delays when a peer is seen
// done, never advances it), and logs how many reads it made over the fleet
// roll, their mean time and its CPU, beside gobgpd's and BIRD's.
//
// When TCPAOBad rises in a phase it logs which of gobgpd's sockets counted
// the bad segments (sessions and listener) and, from ss, the connections on
// port 179 in either namespace that are neither established nor listening:
// segments of a connection one side no longer has reach gobgpd's listener,
// which cannot verify them (it does not know their ISNs).
package speakerbench
