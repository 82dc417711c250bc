//go:build linux

package tcpao_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// A key bound to a VRF is deleted through tcpao.DeleteKey (the path every
// aokeyd delete takes) on this kernel: it is gone afterwards, whether the
// kernel has the upstream fix for the ENOENT bug (the delete itself works)
// or not (then DeleteKey must return ErrKernelVRFDelete and the key stays).
// It also pins what the kernel accepts as a key's ifindex: a VRF device, not
// an ordinary interface (lo), so a VRF is what the test needs.
func TestVRFKeyDeleteOnThisKernel(t *testing.T) {
	kerneltest.Require(t)
	ns := netns.New(t, "aovrf")
	if out, err := ns.Run("ip", "link", "add", "vrf-ao", "type", "vrf", "table", "10"); err != nil {
		t.Fatalf("this guest kernel cannot create a VRF device (CONFIG_NET_VRF?): %v: %s", err, out)
	}
	ns.MustRun(t, "ip", "link", "set", "vrf-ao", "up")
	err := ns.Do(func() error {
		vrf, err := net.InterfaceByName("vrf-ao")
		if err != nil {
			return err
		}
		_, s := listenAO(t, net.ListenConfig{})
		k := key("192.0.2.2/32", 1, 1)
		k.IfIndex = 1 // lo: not an L3 master device
		if err := s.AddKey(k, tcpao.AddOptions{}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("key bound to lo = %v, want EINVAL (only a VRF may be named)", err)
		}
		k.IfIndex = vrf.Index
		if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
			t.Fatalf("key bound to VRF ifindex %d: %v", vrf.Index, err)
		}
		other := key("192.0.2.3/32", 2, 2) // default VRF, must stay
		if err := s.AddKey(other, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		err = tcpao.DeleteKey(s, tcpao.DelKey{KeyRef: k.KeyRef, Async: true})
		ks, kerr := s.Keys(tcpao.KeyFilter{})
		if kerr != nil {
			t.Fatal(kerr)
		}
		switch {
		case err == nil:
			if len(ks) != 1 || ks[0].Peer != other.Peer {
				t.Fatalf("after deleting the VRF key the listener holds %v, want only %s", ks, other.Peer)
			}
			t.Logf("VRF-scoped key (ifindex %d) deleted with del_async through DeleteKey; this kernel has the fix", vrf.Index)
		case errors.Is(err, tcpao.ErrKernelVRFDelete):
			if len(ks) != 2 {
				t.Fatalf("DeleteKey reported the ENOENT bug but the listener holds %v", ks)
			}
			t.Logf("this kernel has the VRF delete bug; DeleteKey refused clearly: %v", err)
		default:
			t.Fatalf("DeleteKey of the VRF key: %v", err)
		}
		// aokeyd's own listener path: the planner's del_async, applied
		// by rotator.SyncListener.
		k3 := key("192.0.2.4/32", 3, 3)
		k3.IfIndex = vrf.Index
		if err := s.AddKey(k3, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = rotator.SyncListener(s, rotator.Desired{Socket: "lis", Keys: []rotator.DesiredKey{{Key: other}}}, rotator.ListenerOptions{})
		ks, kerr = s.Keys(tcpao.KeyFilter{})
		switch {
		case kerr != nil:
			t.Fatal(kerr)
		case err == nil && slices.ContainsFunc(ks, func(k tcpao.KeyInfo) bool { return k.IfIndex != 0 && k.SendID == 3 }):
			t.Fatalf("SyncListener succeeded but the VRF key is still there: %v", ks)
		case err != nil && !errors.Is(err, tcpao.ErrKernelVRFDelete):
			t.Fatalf("SyncListener deleting the VRF key: %v", err)
		}
		t.Logf("rotator.SyncListener removed the VRF-scoped key: %v (err %v)", err == nil, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A key made Current_key and RNext_key while the socket was in TCP_CLOSE
// keeps that role after listen(). DeleteKey never deletes it with
// del_async (the use-after-free of kernels without the upstream fix): it
// deletes synchronously, which the kernel refuses with EBUSY, reported as
// ErrListenerKeyInUse, and the key and the listener's Current_key stay
// valid. A key that is not in use is still deleted with del_async. The
// guest must survive all of it.
func TestListenerStaleCurrentDelete(t *testing.T) {
	kerneltest.Require(t)
	a, b := key("127.0.0.2/32", 1, 1), key("127.0.0.3/32", 2, 2)
	var addErr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		s := tcpao.New(c) // TCP_CLOSE: before bind and listen
		addErr = errors.Join(s.AddKey(a, tcpao.AddOptions{SetCurrent: true, SetRNext: true}), s.AddKey(b, tcpao.AddOptions{}))
		return nil
	}}
	ln, s := listenAO(t, lc)
	if addErr != nil {
		t.Fatalf("keys on the closed socket: %v", addErr)
	}
	in, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	if !in.HaveCurrent || in.CurrentKey != a.SendID || !in.HaveRNext || in.RNextKey != a.RecvID {
		t.Fatalf("listener info %+v: want the key set before listen() still Current_key and RNext_key", in)
	}
	err = tcpao.DeleteKey(s, tcpao.DelKey{KeyRef: a.KeyRef, Async: true})
	switch {
	case errors.Is(err, tcpao.ErrListenerKeyInUse):
		t.Logf("in-use key on the listener: refused without del_async: %v", err)
		if ks, err := s.Keys(tcpao.KeyFilter{Ref: &a.KeyRef}); err != nil || len(ks) != 1 {
			t.Fatalf("the refused key is not on the listener any more: %v %v", ks, err)
		}
	case err == nil:
		t.Logf("this kernel deleted the in-use listener key synchronously")
	default:
		t.Fatalf("DeleteKey of the listener's Current_key: %v", err)
	}
	if _, err := s.Info(); err != nil { // reads Current_key: must be a live key
		t.Fatal(err)
	}
	// aokeyd's own listener path: a plan that retires the in-use key.
	_, err = rotator.SyncListener(s, rotator.Desired{Socket: "lis", Keys: []rotator.DesiredKey{{Key: b}}}, rotator.ListenerOptions{})
	if err != nil && !errors.Is(err, tcpao.ErrListenerKeyInUse) {
		t.Fatalf("SyncListener retiring the listener's Current_key: %v", err)
	}
	t.Logf("rotator.SyncListener retiring the in-use key: %v", err)
	if _, err := s.Info(); err != nil {
		t.Fatal(err)
	}
	if err := tcpao.DeleteKey(s, tcpao.DelKey{KeyRef: b.KeyRef, Async: true}); err != nil {
		t.Fatalf("DeleteKey of a key not in use: %v", err)
	}
	if ks, err := s.Keys(tcpao.KeyFilter{Ref: &b.KeyRef}); err != nil || len(ks) != 0 {
		t.Fatalf("key not in use still on the listener: %v %v", ks, err)
	}
	// The listener still works: a connection from an address with no key
	// is accepted as plain TCP.
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.9:0"))}
	d.SetMultipathTCP(false) // as listenAO's listener: plain TCP
	c, err := d.DialContext(context.Background(), "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatalf("connect to the listener afterwards: %v", err)
	}
	c.Close()
}
