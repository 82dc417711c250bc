//go:build linux

package tcpao_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

func key(peer string, send, recv uint8) tcpao.Key {
	return tcpao.Key{
		KeyRef:    tcpao.KeyRef{Peer: netip.MustParsePrefix(peer), SendID: send, RecvID: recv},
		Algorithm: tcpao.HMACSHA256,
		Secret:    tcpao.NewSecret([]byte("kernel-test-secret")),
	}
}

// On a kernel without CONFIG_TCP_AO (the host) the option is unknown and the
// error names the key and wraps the errno; in the guest the same call works.
// On a host with CONFIG_MPTCP it is never ErrMPTCP: listenAO's listener is
// plain TCP (net.Listen's would be MPTCP, and fail so in any guest).
func TestAddKeyOnThisKernel(t *testing.T) {
	_, s := listenAO(t, net.ListenConfig{})
	err := s.AddKey(key("127.0.0.2/32", 1, 2), tcpao.AddOptions{})
	if kerneltest.InGuest() {
		if err != nil {
			t.Fatalf("AddKey in the TCP-AO guest: %v", err)
		}
		return
	}
	if !errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, tcpao.ErrMPTCP) {
		t.Fatalf("AddKey without CONFIG_TCP_AO = %v, want ENOPROTOOPT on a plain TCP listener", err)
	}
	if !strings.Contains(err.Error(), "send=1 recv=2 peer=127.0.0.2/32") || !strings.Contains(err.Error(), "TCP_AO_ADD_KEY") {
		t.Errorf("error %q does not name the key and the option", err)
	}
}

// The net package path: keys installed from ListenConfig/Dialer Control
// hooks (before listen and connect), a GET_KEYS answer larger than the first
// buffer, and INFO on both ends of a real connection.
func TestNetPackageConnection(t *testing.T) {
	kerneltest.Require(t)
	const extra = 20
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return tcpao.New(c).AddKey(key("127.0.0.1/32", 2, 1), tcpao.AddOptions{})
	}}
	ln, ls := listenAO(t, lc)
	for i := 0; i < extra; i++ {
		k := key(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32).String(), 2, 1)
		if err := ls.AddKey(k, tcpao.AddOptions{}); err != nil {
			t.Fatalf("AddKey %d: %v", i, err)
		}
	}
	ks, err := ls.Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != extra+1 {
		t.Fatalf("Keys = %d keys, want %d", len(ks), extra+1)
	}
	want := key("127.0.0.1/32", 2, 1).Secret.Fingerprint()
	for _, k := range ks {
		if k.Fingerprint != want || k.Algorithm != tcpao.HMACSHA256 || k.MACLen != tcpao.DefaultMACLen {
			t.Fatalf("key %+v does not match what was added", k)
		}
	}

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return tcpao.New(c).AddKey(key("127.0.0.1/32", 1, 2), tcpao.AddOptions{})
	}}
	d.SetMultipathTCP(false) // Go's default for dialers; said, since keys go on it
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer a.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := a.Read(buf); err != nil {
		t.Fatal(err)
	}
	arc, err := a.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	in, err := tcpao.New(arc).Info()
	if err != nil {
		t.Fatal(err)
	}
	if !in.HaveCurrent || in.CurrentKey != 2 || in.RNextKey != 1 || in.PktGood == 0 || in.PktBad != 0 {
		t.Fatalf("accepted Info = %+v", in)
	}
	aks, err := tcpao.New(arc).Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(aks) != 1 || aks[0].Peer != netip.MustParsePrefix("127.0.0.1/32") {
		t.Fatalf("accepted keys = %+v, want only the key for 127.0.0.1", aks)
	}
}

// BatchKeys runs adds and deletes on one borrowed descriptor: the keys land
// as with single calls, a failing request stops the batch with the errno,
// GET_KEYS after growing the listener starts from the last count, and the
// bound Socket refuses use after its batch.
func TestBatchKeys(t *testing.T) {
	kerneltest.Require(t)
	_, s := listenAO(t, net.ListenConfig{})
	b, ok := s.(interface {
		BatchKeys(func(tcpao.Socket) error) error
	})
	if !ok {
		t.Fatalf("%T has no BatchKeys", s)
	}
	const peers = 40
	peer := func(i int) string { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)}).String() + "/32" }
	var kept tcpao.Socket
	err := b.BatchKeys(func(bs tcpao.Socket) error {
		kept = bs
		for i := range peers {
			if err := bs.AddKey(key(peer(i), 1, 1), tcpao.AddOptions{}); err != nil {
				return err
			}
		}
		for i := range peers / 2 {
			if err := bs.AddKey(key(peer(i), 2, 2), tcpao.AddOptions{}); err != nil {
				return err
			}
			if err := bs.DelKey(tcpao.DelKey{KeyRef: key(peer(i), 1, 1).KeyRef, Async: true}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("BatchKeys: %v", err)
	}
	for range 2 { // the second read starts from the first one's count
		keys, err := s.Keys(tcpao.KeyFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[uint8]int{}
		for _, k := range keys {
			ids[k.SendID]++
		}
		if len(keys) != peers || ids[1] != peers/2 || ids[2] != peers/2 {
			t.Fatalf("listener holds %d keys %v, want %d: half with IDs 1, half with 2", len(keys), ids, peers)
		}
	}
	err = b.BatchKeys(func(bs tcpao.Socket) error { return bs.AddKey(key(peer(0), 2, 2), tcpao.AddOptions{}) })
	if !errors.Is(err, unix.EEXIST) || !strings.Contains(err.Error(), "TCP_AO_ADD_KEY") {
		t.Fatalf("duplicate add in a batch = %v, want EEXIST naming the option", err)
	}
	if err := kept.AddKey(key(peer(peers), 1, 1), tcpao.AddOptions{}); err == nil {
		t.Fatal("the bound Socket still worked after its batch")
	}
}

// listenAO listens on a loopback port with lc (closed when the test ends)
// and returns the listener with its TCP-AO surface. The listener is plain
// TCP whatever lc says: Go 1.24 and later listen with Multipath TCP by
// default where the kernel has CONFIG_MPTCP (Debian's), and an MPTCP
// socket refuses every TCP-AO option (ErrMPTCP).
func listenAO(t *testing.T, lc net.ListenConfig) (net.Listener, tcpao.Socket) {
	t.Helper()
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return ln, tcpao.New(rc)
}
