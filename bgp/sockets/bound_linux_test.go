//go:build linux

package sockets

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLookupDeviceBound: a socket bound to a device (SO_BINDTODEVICE, as
// bgpd binds the sockets of a VRF to the VRF's device) is found by its
// addresses. The kernel's exact sock_diag lookup matches the request's
// interface against the socket's bound device, so with none given it does
// not find such a socket (FRR's VRF sessions in the guest: "socket not
// found").
func TestLookupDeviceBound(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_BINDTODEVICE needs root")
	}
	l, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no IPv4 loopback: %v", err)
	}
	defer l.Close()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), "lo") })
		if err != nil {
			return err
		}
		return serr
	}}
	d.SetMultipathTCP(false)
	c, err := d.DialContext(context.Background(), "tcp4", l.Addr().String())
	if err != nil {
		t.Skipf("dial bound to lo: %v", err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	remote := netip.MustParseAddrPort(c.RemoteAddr().String())
	f := Finder{PID: os.Getpid()}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		local, remote netip.AddrPort
		dev           int
	}{{"bound client end", local, remote, lo.Index}, {"unbound server end", remote, local, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := f.Established(tc.local, tc.remote)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Local != tc.local || ref.Remote != tc.remote {
				t.Fatalf("found %+v, want %s<->%s", ref, tc.local, tc.remote)
			}
			if ref.BoundDev != tc.dev {
				t.Fatalf("BoundDev = %d, want %d", ref.BoundDev, tc.dev)
			}
		})
	}
}

// TestListenersBoundDev: a listener bound to a device (as a speaker's
// per-VRF listener is bound to the VRF's device) is listed with that
// device, an unbound one with none.
func TestListenersBoundDev(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_BINDTODEVICE needs root")
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	lc := func(dev string) net.ListenConfig {
		c := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr == nil && dev != "" {
					serr = unix.BindToDevice(int(fd), dev)
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		c.SetMultipathTCP(false) // a speaker's listener aokeyd can key
		return c
	}
	bcfg := lc("lo")
	bound, err := bcfg.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("listen bound to lo: %v", err)
	}
	defer bound.Close()
	ucfg := lc("")
	unbound, err := ucfg.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer unbound.Close()
	refs, err := Finder{PID: os.Getpid()}.Listeners(0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.AddrPort]int{
		netip.MustParseAddrPort(bound.Addr().String()):   lo.Index,
		netip.MustParseAddrPort(unbound.Addr().String()): 0,
	}
	got := map[netip.AddrPort]int{}
	for _, r := range refs {
		if _, ok := want[r.Local]; ok {
			got[r.Local] = r.BoundDev
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("listeners' bound devices: %v, want %v", got, want)
	}
}
