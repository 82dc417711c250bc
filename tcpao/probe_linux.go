//go:build linux

package tcpao

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Probe asks the running kernel whether it has TCP-AO: it opens a scratch
// TCP socket and reads TCP_AO_INFO from it. A kernel with TCP-AO answers
// ENOENT (the socket has no keys); one built without CONFIG_TCP_AO answers
// ENOPROTOOPT, and Probe returns an error matching ErrNoKernelSupport. Any
// other failure (a seccomp filter or an LSM denying either call) is a
// *ProbeError: the kernel could not be asked, which is no answer either.
func Probe() error {
	fd, err := probeSocket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		fd, err = probeSocket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return &ProbeError{Err: os.NewSyscallError("socket", err)}
	}
	defer unix.Close(fd)
	err = probeInfo(fd)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOPROTOOPT):
		return fmt.Errorf("%w (%w)", ErrNoKernelSupport, err)
	}
	return &ProbeError{Err: err}
}

// The probe's system calls: variables so that a test can fail them.
var (
	probeSocket = unix.Socket
	probeInfo   = func(fd int) error { _, err := info(fd); return err }
)
