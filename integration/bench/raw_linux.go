//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package bench

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw loop's own copies of the uAPI requests (include/uapi/linux/tcp.h),
// independent of package tcpao so that the baseline shares no code with what
// it is compared against. Little-endian bitfields: bit 0 is the first field.

const (
	rawAddKey   = 38 // TCP_AO_ADD_KEY
	rawDelKey   = 39 // TCP_AO_DEL_KEY
	rawDelAsync = 1 << 2
)

type rawAdd struct {
	Addr      [128]byte
	AlgName   [64]byte
	IfIndex   int32
	Bits      uint32
	Reserved2 uint16
	Prefix    uint8
	SndID     uint8
	RcvID     uint8
	MACLen    uint8
	KeyFlags  uint8
	KeyLen    uint8
	Key       [80]byte
}

type rawDel struct {
	Addr       [128]byte
	IfIndex    int32
	Bits       uint32
	Reserved2  uint16
	Prefix     uint8
	SndID      uint8
	RcvID      uint8
	CurrentKey uint8
	RNext      uint8
	KeyFlags   uint8
}

// Sizes the kernel checks optlen against.
var _ = [1]struct{}{}[unsafe.Sizeof(rawAdd{})-288]
var _ = [1]struct{}{}[unsafe.Sizeof(rawDel{})-144]

func rawSockaddr(dst *[128]byte, a netip.Addr) {
	binary.LittleEndian.PutUint16(dst[0:2], unix.AF_INET)
	b := a.As4()
	copy(dst[4:8], b[:])
}

func newRawAdd(p netip.Prefix, alg string, send, recv uint8, key []byte) rawAdd {
	var c rawAdd
	rawSockaddr(&c.Addr, p.Addr())
	copy(c.AlgName[:], alg)
	c.Prefix = uint8(p.Bits())
	c.SndID, c.RcvID = send, recv
	c.KeyLen = uint8(copy(c.Key[:], key))
	return c
}

func newRawDel(p netip.Prefix, send, recv uint8, async bool) rawDel {
	var c rawDel
	rawSockaddr(&c.Addr, p.Addr())
	c.Prefix = uint8(p.Bits())
	c.SndID, c.RcvID = send, recv
	if async {
		c.Bits = rawDelAsync
	}
	return c
}

// rawStep is one pre-built request: an add or a delete.
type rawStep struct {
	add *rawAdd
	del *rawDel
}

// rawRun issues every step on fd and stops at the first error. It is the
// timed part of the baseline: nothing but the system calls.
func rawRun(fd int, steps []rawStep) (int, error) {
	for i, s := range steps {
		var e unix.Errno
		if s.add != nil {
			_, _, e = unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, rawAddKey, uintptr(unsafe.Pointer(s.add)), unsafe.Sizeof(*s.add), 0)
		} else {
			_, _, e = unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, rawDelKey, uintptr(unsafe.Pointer(s.del)), unsafe.Sizeof(*s.del), 0)
		}
		if e != 0 {
			return i, fmt.Errorf("raw step %d: %w", i, e)
		}
	}
	return len(steps), nil
}

// wipeRaw zeroes the key bytes of every pre-built add.
func wipeRaw(steps []rawStep) {
	for _, s := range steps {
		if s.add != nil {
			clear(s.add.Key[:])
		}
	}
}

func rawAddStep(p netip.Prefix, alg string, send, recv uint8, key []byte) rawStep {
	a := newRawAdd(p, alg, send, recv, key)
	return rawStep{add: &a}
}

func rawDelStep(p netip.Prefix, send, recv uint8, async bool) rawStep {
	d := newRawDel(p, send, recv, async)
	return rawStep{del: &d}
}
