// Package speakerbench is the real-speaker items of `make bench`: the fleet
// item (TestFleet), gobgpd v3.37 with N passive TCP-AO neighbours plus nine
// baseline neighbours, BIRD 2.17 with N+9 protocols from as many source
// addresses on the far side, and the aokeyd binary managing gobgpd's
// sockets; and the bird-fleet item (TestBirdFleet, below), BIRD as a route
// server keyed by aokeyd's native BIRD executor; all in the TCP-AO guest.
//
// TestFleet runs only when AOKEYD_FLEET_SIZES names the
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
//
// # The bird-fleet item
//
// TestBirdFleet runs only when AOKEYD_BIRDFLEET_SIZES names its sizes
// (bench.sh's AOKEYD_BENCH_BIRDFLEET_SIZES, default 1000; "off" skips
// it). The fleet item's roles turned around: in A's namespace BIRD is the
// route server, one address and one BGP protocol per member (passive),
// each protocol including the key file aokeyd writes for its member, and
// the aokeyd binary drives it natively (speaker type bird, found by its pid
// file); in B's namespace the members are one BIRD with one protocol per
// member address toward the route server (the fleet item's far end, keyed
// statically by the bench, as the members' operators would: k1, k2 and
// k3, k2 preferred ahead of the roll). Chains: one policy key chain per
// member, each reading the key source's one shared chain (a binding names
// one chain, so members that share a key share a source chain). The bench
// raises net.core.optmem_max in the route server's namespace: its one
// listener holds every member's keys, and aokeyd raises it only for the
// speakers whose sockets it keys itself. Per N it measures, reading the
// route server BIRD's sockets from the kernel as the fleet item reads
// gobgpd's:
//
//   - a scheduled roll of every member (the shared chain's k2 sendable at
//     one instant): until the last member's session and listener entry
//     hold k2 current and no k1 (roll_s), and BIRD's configures aokeyd
//     made from just before that instant until every member sends with k2
//     (aokeyd_speaker_rpcs_total{method="birdc configure"}; aokeyd's
//     "BIRD reconfigured" lines give each one's files and time);
//   - aokeyd's, the route server BIRD's and the members' BIRD CPU over the
//     roll, aokeyd's and the route server BIRD's over the revoke and over
//     a steady window with nothing due (/proc/PID/stat);
//   - `aoctl revoke shared/k2` with k3 the backup, from the command's start
//     until no route server socket nor listener entry holds k2
//     (revoke_ms), and its configures;
//   - flaps (either BIRD's `since` for the member's protocol) and TCPAOBad
//     in both namespaces, from the armed members to the end, which must
//     stay 0.
//
// For each N it prints, on stdout,
//
//	bird-fleet: n=N roll_s=X configures=C revoke_ms=Y flaps=F pkt_bad=B
//
// and, with AOKEYD_FLEET_OUT, appends it to birdfleet.txt there, the full
// figures to birdfleet.json, and keeps aokeyd's log
// (birdfleet-aokeyd-nN.log).
package speakerbench
