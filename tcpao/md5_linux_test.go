//go:build linux

package tcpao_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/integration/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// md5Add puts a TCP-MD5 key for peer (a prefix: TCP_MD5SIG_EXT with
// TCP_MD5SIG_FLAG_PREFIX) on fd; an empty secret deletes it.
func md5Add(fd int, peer netip.Prefix, secret string) error {
	var sig unix.TCPMD5Sig
	sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sig.Addr))
	sa.Family = unix.AF_INET
	sa.Addr = peer.Addr().As4()
	sig.Flags = unix.TCP_MD5SIG_FLAG_PREFIX
	sig.Prefixlen = uint8(peer.Bits())
	sig.Keylen = uint16(copy(sig.Key[:], secret))
	return unix.SetsockoptTCPMD5Sig(fd, unix.IPPROTO_TCP, unix.TCP_MD5SIG_EXT, &sig)
}

func rawCall(t *testing.T, rc syscall.RawConn, f func(fd int) error) error {
	t.Helper()
	var err error
	if cerr := rc.Control(func(fd uintptr) { err = f(int(fd)) }); cerr != nil {
		t.Fatal(cerr)
	}
	return err
}

// TestKernelMD5AndAO (issue 34's first question, on the guest kernel):
// which combinations of TCP-MD5 and TCP-AO keys a listening socket takes,
// for the same peer, overlapping prefixes and different peers, and which
// key an incoming SYN is checked against when both kinds are on one
// listener. Each answer is asserted as the kernel gave it, so that a
// kernel that answers otherwise fails here first.
func TestKernelMD5AndAO(t *testing.T) {
	kerneltest.Require(t)
	const (
		p2 = "127.0.0.2/32"
		p3 = "127.0.0.3/32"
	)
	listen := func(t *testing.T) (net.Listener, syscall.RawConn) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		rc, err := ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		return ln, rc
	}
	ao := func(t *testing.T, rc syscall.RawConn, peer string, send, recv uint8) error {
		return tcpao.New(rc).AddKey(key(peer, send, recv), tcpao.AddOptions{})
	}
	md5 := func(t *testing.T, rc syscall.RawConn, peer string) error {
		return rawCall(t, rc, func(fd int) error { return md5Add(fd, netip.MustParsePrefix(peer), "an md5 password") })
	}
	for _, tc := range []struct {
		name          string
		steps         [2]func(*testing.T, syscall.RawConn) error
		second        error // what the second add answers
		secondRefused bool
	}{
		{"md5 then ao, same peer", [2]func(*testing.T, syscall.RawConn) error{
			func(t *testing.T, rc syscall.RawConn) error { return md5(t, rc, p2) },
			func(t *testing.T, rc syscall.RawConn) error { return ao(t, rc, p2, 1, 2) }}, unix.EKEYREJECTED, true},
		{"ao then md5, same peer", [2]func(*testing.T, syscall.RawConn) error{
			func(t *testing.T, rc syscall.RawConn) error { return ao(t, rc, p2, 1, 2) },
			func(t *testing.T, rc syscall.RawConn) error { return md5(t, rc, p2) }}, unix.EKEYREJECTED, true},
		{"md5 and ao, different peers", [2]func(*testing.T, syscall.RawConn) error{
			func(t *testing.T, rc syscall.RawConn) error { return md5(t, rc, p2) },
			func(t *testing.T, rc syscall.RawConn) error { return ao(t, rc, p3, 1, 2) }}, nil, false},
		{"md5 for a /8 and ao for a host in it", [2]func(*testing.T, syscall.RawConn) error{
			func(t *testing.T, rc syscall.RawConn) error { return md5(t, rc, "127.0.0.0/8") },
			func(t *testing.T, rc syscall.RawConn) error { return ao(t, rc, p2, 1, 2) }}, unix.EKEYREJECTED, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rc := listen(t)
			if err := tc.steps[0](t, rc); err != nil {
				t.Fatalf("first add: %v", err)
			}
			err := tc.steps[1](t, rc)
			t.Logf("second add: %v", err)
			if tc.secondRefused != (err != nil) || (err != nil && !errors.Is(err, tc.second)) {
				t.Errorf("second add = %v, want %v", err, tc.second)
			}
		})
	}

	// Both kinds on one listener, for different peers: a SYN from each is
	// checked against its own kind.
	t.Run("one listener, md5 for one peer and ao for another", func(t *testing.T) {
		ln, rc := listen(t)
		if err := md5(t, rc, p2); err != nil {
			t.Fatal(err)
		}
		if err := ao(t, rc, p3, 2, 1); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		dial := func(local string, control func(syscall.RawConn) error) error {
			d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)},
				Control: func(_, _ string, c syscall.RawConn) error { return control(c) }}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := d.DialContext(ctx, "tcp4", ln.Addr().String())
			if err == nil {
				c.Close()
			}
			return err
		}
		toListener := func(rc syscall.RawConn, f func(fd int) error) error { return rawCall(t, rc, f) }
		md5From2 := dial("127.0.0.2", func(c syscall.RawConn) error {
			return toListener(c, func(fd int) error { return md5Add(fd, netip.MustParsePrefix("127.0.0.1/32"), "an md5 password") })
		})
		aoFrom3 := dial("127.0.0.3", func(c syscall.RawConn) error {
			return tcpao.New(c).AddKey(key("127.0.0.1/32", 1, 2), tcpao.AddOptions{})
		})
		unsignedFrom2 := dial("127.0.0.2", func(syscall.RawConn) error { return nil })
		aoFrom2 := dial("127.0.0.2", func(c syscall.RawConn) error {
			return tcpao.New(c).AddKey(key("127.0.0.1/32", 1, 2), tcpao.AddOptions{})
		})
		t.Logf("md5 from .2: %v; ao from .3: %v; unsigned from .2: %v; ao from .2: %v", md5From2, aoFrom3, unsignedFrom2, aoFrom2)
		if md5From2 != nil || aoFrom3 != nil {
			t.Errorf("each peer with its own kind: md5 from .2 %v, ao from .3 %v; want both connected", md5From2, aoFrom3)
		}
		if unsignedFrom2 == nil || aoFrom2 == nil {
			t.Errorf("the md5 peer without md5: unsigned %v, ao %v; want both refused", unsignedFrom2, aoFrom2)
		}
	})
}
