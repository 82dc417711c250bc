package sockets

import (
	"net/netip"
	"testing"
)

// TestIsExact: the kernel's answer to an exact sock_diag request is the
// connection asked for only when its state is not LISTEN and its
// addresses are the request's (zones aside): for a connection over an
// IPv6 link-local address (bound to its link) the kernel answers with the
// listener its SYN reached.
func TestIsExact(t *testing.T) {
	local := netip.MustParseAddrPort("[fe80::a]:179")
	remote := netip.MustParseAddrPort("[fe80::b]:45962")
	conn := Socket{State: 1, Local: local, Remote: remote}
	for _, c := range []struct {
		name string
		s    Socket
		want bool
	}{
		{"the connection", conn, true},
		{"the listener", Socket{State: StateListen, Local: netip.MustParseAddrPort("[::]:179")}, false},
		{"a listener at the address", Socket{State: StateListen, Local: local, Remote: remote}, false},
		{"another port", Socket{State: 1, Local: local, Remote: netip.MustParseAddrPort("[fe80::b]:45963")}, false},
		{"IPv4-mapped", Socket{State: 1, Local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:179"), Remote: netip.MustParseAddrPort("[::ffff:10.0.0.2]:5")}, false},
	} {
		if got := isExact(c.s, local, remote); got != c.want {
			t.Errorf("%s: isExact = %t, want %t", c.name, got, c.want)
		}
	}
	v4l, v4r := netip.MustParseAddrPort("10.0.0.1:179"), netip.MustParseAddrPort("10.0.0.2:5")
	if !isExact(Socket{State: 1, Local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:179"), Remote: netip.MustParseAddrPort("[::ffff:10.0.0.2]:5")}, v4l, v4r) {
		t.Error("an AF_INET6 socket talking IPv4 is not the IPv4 connection")
	}
	if !isExact(conn, netip.MustParseAddrPort("[fe80::a%swp1]:179"), netip.MustParseAddrPort("[fe80::b%swp1]:45962")) {
		t.Error("a request with zones does not match the connection")
	}
}
