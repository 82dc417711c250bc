// Package connectguard puts TCP-AO keys on a program's BGP sockets before
// connect(2) and before listen(2), without modifying the program: `aokeyd
// exec -- gobgpd -f /etc/gobgpd.conf` runs gobgpd under a seccomp filter
// that hands every connect() and listen() to aokeyd (user notification),
// and aokeyd installs the keys on the socket and lets the call continue.
//
// Why: the kernel refuses the first TCP-AO key on an established socket
// (EISCONN), so keys must be on the socket before the SYN. gobgpd v3 offers
// no hook in its dialer; without this package AO neighbors have to be
// passive (keys on the listener, see package bgp). And a listener the
// program opens has no key from its listen() until aokeyd finds it and
// keys it (the daemon's listener watch, a second), and the kernel takes an
// unsigned SYN from a peer's address on it meanwhile: keyed inside
// listen(), it never listens without its keys. Without the launcher
// nothing changes: passive AO neighbors keep working as before, their
// listeners keyed by the watch.
//
// # Launcher (Launch, RunChildIfRequested)
//
// Launch stays as a tiny parent of the program. It re-executes its own
// binary (ChildEnv set) as the child, which, on one locked OS thread, sets
// PR_SET_NO_NEW_PRIVS, installs a classic-BPF filter (assembled with
// golang.org/x/net/bpf: check the audit arch, connect(2) and listen(2) ->
// SECCOMP_RET_USER_NOTIF, everything else allowed) with
// SECCOMP_FILTER_FLAG_NEW_LISTENER, sends the listener fd to the parent over
// a socketpair (SCM_RIGHTS), waits for the parent's ack and execs the
// program from that same thread (a filter installed on another thread is not
// inherited, and TSYNC is not needed: exec ends the other threads). The
// parent keeps the listener, serves it on a unix socket (mode 0600, peers
// must be root or its own uid) to every supervisor that asks (Fetch),
// forwards SIGTERM/INT/HUP/QUIT/USR1/USR2 to the program and exits with the
// program's status. Use it as systemd's ExecStart= (Type=simple; the main
// PID is the launcher).
//
// # Supervisor (NewSupervisor, Supervisor.Run)
//
// For each notification, with the receive struct zeroed before each RECV
// and EINTR/ENOENT handled: the destination sockaddr is read from the
// program's memory (process_vm_readv). A connect that is not IPv4/IPv6 or
// not to a managed port (BGP port 179 by default) is continued at once,
// without any further system call, so BMP, RPKI and zebra connects are not
// slowed. For a managed port the supervisor re-checks
// SECCOMP_IOCTL_NOTIF_ID_VALID, maps the notifying thread to its process
// (/proc/<tid>/status Tgid: pidfd_open wants the process, the notification
// carries the thread), asks KeysFunc, and for a managed AO peer
// duplicates the socket (pidfd_open + ID_VALID again + pidfd_getfd), adds
// the keys (Current_key and RNext_key as KeysFunc says), closes the
// duplicate and answers SECCOMP_USER_NOTIF_FLAG_CONTINUE. If the socket has
// TCP-AO already (a repeated connect) it is left alone. If the install
// fails, the connect fails with EKEYREJECTED (fail closed: no
// unauthenticated SYN to an AO peer; gobgpd retries after connect-retry).
//
// A listen carries no address: for each one the supervisor maps the thread
// to its process, duplicates the socket (pidfd_getfd after ID_VALID, as for
// a managed connect) and reads the port it is bound to (getsockname). A
// listen of a socket that is not an IPv4 or IPv6 stream socket bound to a
// managed port (gRPC, BMP, a unix socket, zebra's) is continued as soon as
// that is read: no question to aokeyd, nothing written. A repeated listen
// (the socket listens already; only its backlog changes) is continued
// untouched: it was keyed at its first. A Multipath TCP socket on a managed
// port takes no TCP-AO key: its listen is refused (Go then listens with
// plain TCP, which is keyed). Any other is handed to Listen with the
// duplicate, in a goroutine of its own (not one of the Workers: it may
// wait), and continued only when Listen returned nil: until then the socket
// does not listen and the kernel takes no SYN on it. aokeyd's Listen keys
// it with the listener sync itself (the keys and TCP-MD5 passwords every
// listener of the speaker carries), waiting first, if it has no keys yet,
// until it has. A Listen that fails, or a supervisor that stops while
// Listen waits, fails the listen with EKEYREJECTED (fail closed: gobgpd
// and FRR's bgpd report the listen's error). While it waits the supervisor
// checks ID_VALID every listenCheck and ends Listen's context when the
// listen is gone (a thread interrupted restarts the call: a new
// notification, asked about again).
//
// # Failure modes
//
//   - No supervisor yet, or aokeyd (the supervisor) dies: the launcher
//     still holds the listener, so the program's connects and listens
//     wait (they do not fail; its gRPC or vty listen too) until a
//     supervisor fetches the listener again; established sessions are
//     unaffected. A call the dead supervisor had received but not
//     answered would wait for ever, because RECV only returns
//     notifications nobody received: Run therefore starts with Kick, which
//     sends SIGURG to each thread of the program blocked in connect or
//     listen inside seccomp; the wait is interruptible and Go restarts the
//     syscall (SA_RESTART), raising a fresh notification. No call of a Go
//     program stays blocked past the restart (a program that ignores
//     SIGURG is not woken by it). A supervisor that stops in order
//     refuses the listens still waiting for Listen instead.
//   - aokeyd stalls: connects on managed ports block (other destinations
//     are answered by the loop and only wait while all Workers are busy);
//     listens on managed ports block, the others are answered.
//   - Both launcher and supervisor are gone: the listener is closed and
//     every connect() and listen() of the program fails with ENOSYS until
//     it is restarted; its other syscalls and established sessions are
//     unaffected. systemd restarting the unit brings both back.
//
// # CONTINUE is not a security boundary
//
// The sockaddr is read from the program's memory and another thread of the
// program could change it between the read and the kernel's own copy, and
// SECCOMP_USER_NOTIF_FLAG_CONTINUE lets the kernel run the original call
// (seccomp_unotify(2) warns about exactly this). That is acceptable here
// because the supervisor only adds keys, it filters nothing: a program that
// raced it could at worst connect to an AO peer without keys (the peer
// drops the SYN) or carry keys to another host that does not know them.
// The keys themselves already sit in sockets the program owns. Nothing
// relies on the supervisor to keep the program from connecting anywhere.
// A listen's socket is read from the kernel, not from the program's memory,
// but the program names it by descriptor number, and another of its
// threads could put another socket at that number between pidfd_getfd and
// the kernel's own lookup: the program itself could then listen unkeyed.
// The listen guard keeps a peer's unsigned SYN off the listeners of a
// program that does not race it (gobgpd, FRR's bgpd); it is no sandbox.
//
// Only the native syscall ABI is filtered (amd64 and arm64); i386 or x32
// connects and listens on amd64, which Go programs never make, pass
// untouched.
//
// # Cost
//
// A continued connect costs one RECV, one process_vm_readv and one SEND; a
// keyed one adds a /proc read, pidfd_open, pidfd_getfd, the TCP_AO_INFO and
// TCP_AO_ADD_KEY calls and two ID_VALID checks. BenchmarkConnect measures
// both against an unfiltered connect. A listen, rare, costs a RECV, the
// /proc read, pidfd_open, ID_VALID, pidfd_getfd and getsockname on any
// port, and on a managed port the keying.
package connectguard
