//go:build linux

package sockaddr

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAddrPort(t *testing.T) {
	for _, c := range []struct {
		sa   unix.Sockaddr
		want string
		ok   bool
	}{
		{&unix.SockaddrInet4{Port: 179, Addr: [4]byte{192, 0, 2, 1}}, "192.0.2.1:179", true},
		{&unix.SockaddrInet6{Port: 179, Addr: netip.MustParseAddr("2001:db8::1").As16()}, "[2001:db8::1]:179", true},
		{&unix.SockaddrInet6{Port: 1, Addr: netip.MustParseAddr("::ffff:192.0.2.1").As16()}, "[::ffff:192.0.2.1]:1", true},
		{&unix.SockaddrUnix{Name: "/x"}, "invalid AddrPort", false},
	} {
		got, ok := AddrPort(c.sa)
		if got.String() != c.want || ok != c.ok {
			t.Errorf("AddrPort(%#v) = %s, %t; want %s, %t", c.sa, got, ok, c.want, c.ok)
		}
	}
}
