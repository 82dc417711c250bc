// Package connectguard puts TCP-AO keys on a program's outgoing BGP sockets
// before connect(2), without modifying the program: `aokeyd exec -- gobgpd
// -f /etc/gobgpd.conf` runs gobgpd under a seccomp filter that hands every
// connect() to aokeyd (user notification), and aokeyd installs the peer's
// keys on the socket and lets the connect continue.
//
// Why: the kernel refuses the first TCP-AO key on an established socket
// (EISCONN), so keys must be on the socket before the SYN. gobgpd v3 offers
// no hook in its dialer; without this package AO neighbors have to be
// passive (keys on the listener, see package bgp). Without the launcher
// nothing changes: passive AO neighbors keep working as before.
//
// # Launcher (Launch, RunChildIfRequested)
//
// Launch stays as a tiny parent of the program. It re-executes its own
// binary (ChildEnv set) as the child, which, on one locked OS thread, sets
// PR_SET_NO_NEW_PRIVS, installs a classic-BPF filter (assembled with
// golang.org/x/net/bpf: check the audit arch, connect(2) ->
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
// # Failure modes
//
//   - aokeyd (the supervisor) dies: the launcher still holds the listener,
//     so the program's connects wait (they do not fail) until a supervisor
//     fetches the listener again; established sessions are unaffected. A
//     connect the dead supervisor had received but not answered would wait
//     for ever, because RECV only returns notifications nobody received:
//     Run therefore starts with Kick, which sends SIGURG to each thread of
//     the program blocked in connect inside seccomp; the wait is
//     interruptible and Go restarts the syscall (SA_RESTART), raising a
//     fresh notification. No connect stays blocked past the restart.
//   - aokeyd stalls: connects on managed ports block (other destinations
//     are answered by the loop and only wait while all Workers are busy).
//   - Both launcher and supervisor are gone: the listener is closed and
//     every connect() of the program fails with ENOSYS until it is
//     restarted; its other syscalls and established sessions are
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
//
// Only the native syscall ABI is filtered (amd64 and arm64); i386 or x32
// connects on amd64, which Go programs never make, pass untouched.
//
// # Cost
//
// A continued connect costs one RECV, one process_vm_readv and one SEND; a
// keyed one adds a /proc read, pidfd_open, pidfd_getfd, the TCP_AO_INFO and
// TCP_AO_ADD_KEY calls and two ID_VALID checks. BenchmarkConnect measures
// both against an unfiltered connect.
package connectguard
