package tcpaotest

import (
	"errors"
	"syscall"
)

// Linux errno values, spelled out so that the in-memory kernel builds on
// every platform and compares equal (errors.Is) with golang.org/x/sys/unix's
// constants on Linux.
const (
	eNOENT       = syscall.Errno(2)
	eBADF        = syscall.Errno(9)
	eNOMEM       = syscall.Errno(12)
	eBUSY        = syscall.Errno(16)
	eEXIST       = syscall.Errno(17)
	eINVAL       = syscall.Errno(22)
	eMSGSIZE     = syscall.Errno(90)
	eAFNOSUPPORT = syscall.Errno(97)
	eISCONN      = syscall.Errno(106)
	eKEYREJECTED = syscall.Errno(129)
)

// ErrTimeout is what Connect and Exchange return when the real kernel would
// drop the segments: the connection never establishes, the data never
// arrives.
var ErrTimeout = errors.New("tcpaotest: timed out: the peer dropped the segments")
