//go:build linux

package tcpao

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Probe asks the running kernel whether it has TCP-AO: it opens a scratch
// TCP socket and reads TCP_AO_INFO from it. A kernel with TCP-AO answers
// ENOENT (the socket has no keys); one built without CONFIG_TCP_AO answers
// ENOPROTOOPT, and Probe returns an error matching ErrNoKernelSupport. Any
// other failure (a seccomp filter or an LSM denying either call) is a
// *ProbeError: the kernel could not be asked, which is no answer either.
//
// The scratch socket is asked for as IPPROTO_TCP by name. Should it still
// come out as Multipath TCP (a BPF update_socket_protocol program or an
// LD_PRELOAD shim that turns TCP sockets into MPTCP ones), the answer is
// ErrMPTCP: neither a kernel without TCP-AO nor a confined caller.
func Probe() error { return probe(unix.Socket, probeInfo) }

// probe is Probe with its two system calls given (a test fails them).
func probe(socket func(domain, typ, proto int) (int, error), info func(fd int) error) error {
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		fd, err = socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	}
	if err != nil {
		return &ProbeError{Err: os.NewSyscallError("socket", err)}
	}
	defer unix.Close(fd)
	err = info(fd)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, ErrMPTCP):
		return fmt.Errorf("tcpao: probe: the scratch TCP socket is Multipath TCP: %w", err)
	case errors.Is(err, unix.ENOPROTOOPT):
		return fmt.Errorf("%w (%w)", ErrNoKernelSupport, err)
	}
	return &ProbeError{Err: err}
}

// probeInfo is the probe's read of TCP_AO_INFO.
func probeInfo(fd int) error { _, err := info(fd); return err }

// ProbeAlgorithms asks the running kernel which of Algorithms it accepts
// (ProbeAlgorithmsOn, on scratch IPv4 sockets, or IPv6 ones where IPv4 is
// not available, with a key for the loopback address; never connected;
// IPPROTO_TCP, as Probe's).
func ProbeAlgorithms() map[Algorithm]error {
	const typ = unix.SOCK_STREAM | unix.SOCK_CLOEXEC
	fam, peer := unix.AF_INET, netip.MustParsePrefix("127.0.0.1/32")
	if fd, err := unix.Socket(fam, typ, unix.IPPROTO_TCP); errors.Is(err, unix.EAFNOSUPPORT) {
		fam, peer = unix.AF_INET6, netip.MustParsePrefix("::1/128")
	} else if err == nil {
		unix.Close(fd)
	}
	return ProbeAlgorithmsOn(func() (Socket, func(), error) {
		fd, err := unix.Socket(fam, typ, unix.IPPROTO_TCP)
		if err != nil {
			return nil, nil, os.NewSyscallError("socket", err)
		}
		return FromFD(fd), func() { unix.Close(fd) }, nil
	}, peer)
}

// KernelRelease names the running kernel ("Linux 6.12.57"), for messages.
func KernelRelease() string {
	r := UnameRelease()
	if r == "" {
		return "Linux (release unknown)"
	}
	return "Linux " + r
}

// UnameRelease is the running kernel's release as uname -r gives it
// ("6.12.94+deb13-amd64"), for KernelDefects; "" when uname fails, which
// KernelDefects answers with ErrKernelRelease.
func UnameRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
