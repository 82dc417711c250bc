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
// other failure is returned as is (wrapped): the kernel could not be asked.
func Probe() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return fmt.Errorf("tcpao: probe: %w", os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	_, err = info(fd)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOPROTOOPT):
		return fmt.Errorf("%w (%w)", ErrNoKernelSupport, err)
	}
	return fmt.Errorf("tcpao: probe: %w", err)
}
