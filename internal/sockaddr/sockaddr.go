//go:build linux

// Package sockaddr converts the kernel's socket addresses to netip's
// portable forms, once for every package that reads them.
package sockaddr

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// AddrPort is sa's IPv4 or IPv6 address and port (an IPv6 socket's
// address as it is, v4-mapped or not); false for any other family.
func AddrPort(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)), true
	}
	return netip.AddrPort{}, false
}

// Bound is the address and port socket fd is bound to (getsockname).
func Bound(fd int) (netip.AddrPort, bool) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return AddrPort(sa)
}
