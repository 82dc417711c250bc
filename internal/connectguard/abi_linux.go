//go:build linux

package connectguard

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mirrors of include/uapi/linux/seccomp.h (x/sys/unix has the constants but
// not these structs). abi_linux_test.go checks the sizes against the sizes
// encoded in the SECCOMP_IOCTL_NOTIF_* numbers and against what the running
// kernel reports (SECCOMP_GET_NOTIF_SIZES).

// seccompData is struct seccomp_data.
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	ID    uint64
	PID   uint32
	Flags uint32
	Data  seccompData
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// seccompNotifSizes is struct seccomp_notif_sizes.
type seccompNotifSizes struct {
	Notif     uint16
	NotifResp uint16
	Data      uint16
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// recv is SECCOMP_IOCTL_NOTIF_RECV into a zeroed n (the kernel refuses a
// non-zero buffer with EINVAL).
func recv(fd int, n *seccompNotif) error {
	*n = seccompNotif{}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n))
}

// idValid is SECCOMP_IOCTL_NOTIF_ID_VALID: whether the notifying thread is
// still blocked in the syscall of notification id (so pids and memory read
// so far belonged to it).
func idValid(fd int, id uint64) bool {
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

// respond is SECCOMP_IOCTL_NOTIF_SEND: CONTINUE when errno is 0, else fail
// the syscall with errno. ENOENT (the thread is gone or was interrupted)
// is returned for the caller to count.
func respond(fd int, id uint64, errno unix.Errno) error {
	r := seccompNotifResp{ID: id}
	if errno == 0 {
		r.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	} else {
		r.Error = -int32(errno)
	}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// notifSizes asks the running kernel for its struct sizes.
func notifSizes() (seccompNotifSizes, error) {
	var s seccompNotifSizes
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return s, e
	}
	return s, nil
}

// sockaddrMax is sizeof(struct sockaddr_in6), the most connect() needs read.
const sockaddrMax = 28

var errNotInet = errors.New("not an IPv4 or IPv6 sockaddr")

// parseSockaddr decodes the sockaddr_in or sockaddr_in6 that connect() was
// given (b holds min(addrlen, 28) bytes). IPv4-mapped IPv6 addresses are
// unmapped. The IPv6 scope id is kept, as the zone in decimal, for a
// link-local destination alone (fe80::b%7: the interface with ifindex 7,
// which names an interface neighbour's link; the daemon maps it to the
// interface's name), and dropped for every other (it means nothing there).
func parseSockaddr(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, errNotInet
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) < 8 {
			return netip.AddrPort{}, errNotInet
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), nil
	case unix.AF_INET6:
		if len(b) < 24 {
			return netip.AddrPort{}, errNotInet
		}
		a := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		if len(b) >= sockaddrMax && a.IsLinkLocalUnicast() {
			if scope := binary.NativeEndian.Uint32(b[24:28]); scope != 0 {
				a = a.WithZone(strconv.FormatUint(uint64(scope), 10))
			}
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[2:4])), nil
	}
	return netip.AddrPort{}, errNotInet
}

// readSockaddr copies connect()'s sockaddr out of thread tid's memory.
func readSockaddr(tid int, ptr, length uint64) (netip.AddrPort, error) {
	n := min(length, sockaddrMax)
	if n < 2 || ptr == 0 {
		return netip.AddrPort{}, errNotInet
	}
	var buf [sockaddrMax]byte
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(int(n))
	remote := []unix.RemoteIovec{{Base: uintptr(ptr), Len: int(n)}}
	got, err := unix.ProcessVMReadv(tid, local, remote, 0)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return parseSockaddr(buf[:got])
}
