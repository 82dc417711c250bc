// Package errno is the one list of Linux errno values that the in-memory
// kernel (tcpaotest) returns and the conformance table expects. They are
// spelled out so that both build on every platform and compare equal
// (errors.Is) with golang.org/x/sys/unix's constants on Linux.
package errno

import (
	"strconv"
	"syscall"
)

// The errno values of the TCP-AO socket options and of connect(2).
const (
	ENOENT       = syscall.Errno(2)
	EBADF        = syscall.Errno(9)
	ENOMEM       = syscall.Errno(12)
	EBUSY        = syscall.Errno(16)
	EEXIST       = syscall.Errno(17)
	EINVAL       = syscall.Errno(22)
	EMSGSIZE     = syscall.Errno(90)
	EAFNOSUPPORT = syscall.Errno(97)
	EISCONN      = syscall.Errno(106)
	EKEYREJECTED = syscall.Errno(129)
)

var names = map[syscall.Errno]string{
	ENOENT: "ENOENT", EBADF: "EBADF", ENOMEM: "ENOMEM", EBUSY: "EBUSY", EEXIST: "EEXIST", EINVAL: "EINVAL",
	EMSGSIZE: "EMSGSIZE", EAFNOSUPPORT: "EAFNOSUPPORT", EISCONN: "EISCONN", EKEYREJECTED: "EKEYREJECTED",
}

// Name is the symbolic name of e ("EINVAL"), or "errno N" for one not in
// the list; it reads the same on every platform.
func Name(e syscall.Errno) string {
	if n, ok := names[e]; ok {
		return n
	}
	return "errno " + strconv.Itoa(int(e))
}
