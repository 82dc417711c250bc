//go:build linux

package sockets

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// sock_diag shows a socket's TCP-MD5 keys to a CAP_NET_ADMIN reader: the
// listener's as installed, an accepted socket's as the host copy the
// kernel made of the listener's key, each with its password's fingerprint;
// a deleted key is gone. This is how aokeyd reads MD5 keys back (Linux
// has no getsockopt for them).
func TestDiagMD5Keys(t *testing.T) {
	kerneltest.Require(t)
	ln, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	md5, err := tcpao.MD5(tcpao.New(rc))
	if err != nil {
		t.Fatal(err)
	}
	key := func(peer, pw string) tcpao.MD5Key {
		return tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: netip.MustParsePrefix(peer)}, Secret: tcpao.NewSecret([]byte(pw))}
	}
	for _, k := range []tcpao.MD5Key{key("127.0.0.2/32", "pw-a"), key("10.0.0.0/8", "pw-b")} {
		if err := md5.AddMD5(k); err != nil {
			t.Fatal(err)
		}
	}
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()
	d, err := OpenDiag(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.MD5 = true
	listenerMD5 := func() []tcpao.MD5Info {
		ls, err := d.Listeners()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ls {
			if s.Local.Port() == port {
				return s.MD5
			}
		}
		t.Fatal("listener not found")
		return nil
	}
	sorted := func(s []tcpao.MD5Info) []tcpao.MD5Info {
		return slices.SortedFunc(slices.Values(s), func(a, b tcpao.MD5Info) int { return a.Peer.Addr().Compare(b.Peer.Addr()) })
	}
	want := []tcpao.MD5Info{md5Info("10.0.0.0/8", "pw-b"), md5Info("127.0.0.2/32", "pw-a")}
	if got := sorted(listenerMD5()); !slices.Equal(got, want) {
		t.Fatalf("listener MD5 keys %+v, want %+v", got, want)
	}

	// A connection from the MD5 peer: its accepted socket holds a host
	// copy of the listener's key.
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Control: func(_, _ string, c syscall.RawConn) error {
		m, err := tcpao.MD5(tcpao.New(c))
		if err != nil {
			return err
		}
		return m.AddMD5(key("127.0.0.1/32", "pw-a"))
	}}
	dl.SetMultipathTCP(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dl.DialContext(ctx, "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := d.Lookup(netip.MustParseAddrPort(a.LocalAddr().String()), netip.MustParseAddrPort(a.RemoteAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	if want := []tcpao.MD5Info{md5Info("127.0.0.2/32", "pw-a")}; !slices.Equal(s.MD5, want) {
		t.Fatalf("accepted socket's MD5 keys %+v, want %+v", s.MD5, want)
	}

	if err := md5.DelMD5(tcpao.MD5Ref{Peer: netip.MustParsePrefix("127.0.0.2/32")}); err != nil {
		t.Fatal(err)
	}
	if got, want := listenerMD5(), []tcpao.MD5Info{md5Info("10.0.0.0/8", "pw-b")}; !slices.Equal(got, want) {
		t.Fatalf("listener MD5 keys after a delete %+v, want %+v", got, want)
	}
}
