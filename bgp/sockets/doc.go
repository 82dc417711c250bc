// Package sockets finds the TCP sockets of another process (the BGP speaker)
// and lends them out for one setsockopt sequence at a time.
//
// Discovery has three steps:
//
//  1. sock_diag (NETLINK_SOCK_DIAG, inet_diag_req_v2): a LISTEN-only dump of
//     TCP sockets for AF_INET and AF_INET6, and an exact 4-tuple lookup of one
//     established socket. Both return the socket's inode and cookie. The
//     netlink socket is opened inside the speaker's network namespace
//     (/proc/<pid>/ns/net, entered on a locked OS thread) because sock_diag only
//     sees the namespace it was opened in.
//  2. inode -> fd: readlink of /proc/<pid>/fd/* until "socket:[inode]".
//  3. pidfd_open(pid) + pidfd_getfd(pidfd, fd) gives this process a duplicate
//     of the speaker's descriptor. WithSocket checks that the duplicate is
//     still the socket that was discovered (inode; and SO_COOKIE for an established socket), runs one
//     function on it and closes it at once: a duplicate kept open would keep
//     the speaker's socket alive after the speaker closed it.
//
// A Ref names a socket by pid, inode and cookie. Any of them changing (speaker
// restart, session re-established on a new connection) makes WithSocket fail
// with ErrStale, and the caller discovers again.
//
// # Privileges
//
// pidfd_getfd needs PTRACE_MODE_ATTACH_REALCREDS on the target: running as the
// same uid as the speaker with no capabilities works (unless the speaker holds
// capabilities aokeyd lacks, or kernel.yama.ptrace_scope >= 2); otherwise
// aokeyd needs CAP_SYS_PTRACE (plus any capabilities the speaker holds).
// Reading /proc/<pid>/fd needs the same. Entering the speaker's network
// namespace (only when it differs from aokeyd's) needs CAP_SYS_ADMIN.
// sock_diag dumps and lookups need no privilege.
//
// Measured on the development host (2 vCPU VM, Linux 6.18, `go test -bench .`
// in this package), on an open Diag: LISTEN dump of both families ~42 µs,
// exact 4-tuple lookup ~5 µs, WithSocket (pidfd_open + pidfd_getfd + inode
// and cookie check + close) ~5 µs. Finder opens a fresh netlink socket and
// reads /proc/<pid>/fd on every call, which costs more with many fds.
//
// A listener's cookie in a sock_diag dump was seen to differ from its
// SO_COOKIE (Linux 6.18): that listener was Multipath TCP, what Go 1.24
// and later make by default, whose TCP dump entry is its subflow (another
// cookie, the descriptor's inode). WithSocket checks listeners by inode
// only; established sockets are checked by inode and cookie.
//
// # Multipath TCP
//
// An MPTCP socket refuses TCP-AO (tcpao.ErrMPTCP). Listeners never takes
// a speaker's MPTCP listener for no listener: found by its inode, its keys
// fail with tcpao.ErrMPTCP; listed under an inode no descriptor has, the
// speaker's descriptors are looked through for it and it is reported as
// an *MPTCPError (mptcp_linux.go), only then, so that a found TCP
// listener costs nothing more.
package sockets
