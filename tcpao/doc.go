// Package tcpao binds the Linux TCP Authentication Option (RFC 5925) uAPI of
// include/uapi/linux/tcp.h (Linux >= 6.7): TCP_AO_ADD_KEY, TCP_AO_DEL_KEY,
// TCP_AO_INFO and TCP_AO_GET_KEYS.
//
// The package follows the one-feature-four-files layout: tcpao.go holds the
// portable types and sentinel errors, abi.go the structs that mirror the
// kernel's byte for byte, tcpao_linux.go the socket options issued through
// syscall.RawConn.Control (or on a raw fd, for sockets duplicated from another
// process with pidfd_getfd), and tcpao_other.go a stub that fails closed with
// ErrUnsupported.
//
// Errors from the kernel are *os.SyscallError values wrapped with the key IDs,
// so callers test them with errors.Is(err, unix.EBUSY). Key bytes are copied
// into the request only for the duration of a call and zeroed afterwards; no
// type here prints a secret.
//
// TCP-AO is a TCP option: a Multipath TCP socket (SO_PROTOCOL
// IPPROTO_MPTCP, what Go 1.24 and later listen with by default on a kernel
// with CONFIG_MPTCP) refuses every TCP_AO_* and TCP_MD5SIG* option, and
// those failures match ErrMPTCP, never ErrNoKernelSupport (mptcp_linux.go).
// Make the sockets to key plain TCP: net.ListenConfig.SetMultipathTCP(false)
// and net.Dialer.SetMultipathTCP(false), or GODEBUG=multipathtcp=0.
//
// kerneldefects.go holds the kernel releases with known TCP-AO defects as
// data (KernelDefects: which defect, which releases, the Mitigation it calls
// for, such as Deleter.NoAsync for a del_async defect); it is portable, so
// a caller can check a release string on any platform.
//
// Subpackage tcpaotest is an in-memory kernel with the same rules, and
// tcpaotest/conformance a table of kernel behaviours that runs against both.
package tcpao
