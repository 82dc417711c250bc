//go:build linux

package gobgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
)

// md5Key is a test-only TCP-MD5 password.
const md5Key = "aokeyd-test-md5-stand-in"

// setMD5 installs (or with key "" removes) the TCP-MD5 key for peer on fd.
func setMD5(fd int, peer netip.Addr, key string) error {
	sig := unix.TCPMD5Sig{Keylen: uint16(len(key))}
	copy(sig.Key[:], key)
	sa := (*unix.RawSockaddrInet4)(unsafePointer(&sig.Addr))
	sa.Family = unix.AF_INET
	sa.Addr = peer.As4()
	return unix.SetsockoptTCPMD5Sig(fd, unix.IPPROTO_TCP, unix.TCP_MD5SIG, &sig)
}

func TestHostMD5(t *testing.T) {
	lab.RequireNetns(t)
	nsA, nsB := lab.Pair(t, prefixA, prefixB)

	// A: aokeyd's side, passive for B and no password in its config.
	a := lab.StartGobgpd(t, nsA, "a", lab.GobgpdConfig{AS: 65001, RouterID: addrA,
		Neighbors: []lab.Neighbor{{Addr: addrB, AS: 65002, Passive: true}}}, lab.GobgpdOptions{Debug: true})
	// B: the remote router, connecting actively with TCP-MD5.
	b := lab.StartGobgpd(t, nsB, "b", lab.GobgpdConfig{AS: 65002, RouterID: addrB,
		Neighbors: []lab.Neighbor{{Addr: addrA, AS: 65001, Password: md5Key}}}, lab.GobgpdOptions{Debug: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Inventory over gRPC.
	p := lab.WaitPeer(t, a.Speaker, addrB, 10*time.Second, func(bgp.PeerInfo) bool { return true })
	if !p.Passive || p.MD5 || p.PeerASN != 65002 {
		t.Fatalf("inventory of A: %+v (want passive, no MD5, AS 65002)", p)
	}
	pb := lab.WaitPeer(t, b.Speaker, addrA, 10*time.Second, func(bgp.PeerInfo) bool { return true })
	if !pb.MD5 || pb.Passive {
		t.Fatalf("inventory of B: %+v (want MD5, active)", pb)
	}

	// Discovery: A's listeners on 179 (IPv4 and IPv6), in A's namespace.
	ls, err := sockets.Finder{PID: a.PID}.Listeners(179)
	if err != nil {
		t.Fatal(err)
	}
	var v4 *sockets.Ref
	for i, r := range ls {
		t.Logf("gobgpd A listener: %s", r)
		if r.Local.Addr().Is4() {
			v4 = &ls[i]
		}
	}
	if v4 == nil || len(ls) != 2 {
		t.Fatalf("want gobgpd's IPv4 and IPv6 listeners on port 179, got %v", ls)
	}

	// Without a key on A's listener, B's MD5-signed SYNs are dropped: A's
	// kernel counts them (TCPMD5Unexpected) and the session stays down.
	unexpected := tcpExt(t, a.PID, "TCPMD5Unexpected")
	lab.Eventually(t, 20*time.Second, "A's kernel drops two of B's MD5-signed SYNs", func() (bool, string) {
		n := tcpExt(t, a.PID, "TCPMD5Unexpected")
		return n >= unexpected+2, fmt.Sprintf("TCPMD5Unexpected=%d, was %d", n, unexpected)
	})
	if ps, err := a.Speaker.Peers(ctx); err != nil || ps[0].Established() {
		t.Fatalf("session up before A's listener has the MD5 key: %+v %v", ps, err)
	}

	// Follow A's sessions as the rotator would.
	obs := lab.NewObserver()
	tr := bgp.NewTracker(a.Speaker, sockets.System{}, obs, bgp.TrackerOptions{})
	go func() { _ = tr.Run(ctx) }()

	// The key, set through the pidfd_getfd duplicate of gobgpd's listener.
	if err := sockets.WithSocket(*v4, func(fd int) error { return setMD5(fd, addrB, md5Key) }); err != nil {
		t.Fatal(err)
	}
	up := obs.WaitUp(t, 60*time.Second)
	ref := up.Sock.Ref()
	t.Logf("established: %+v on %s", up.Peer, ref)
	if ref.PID != a.PID || ref.Listening || ref.Local.Port() != 179 || ref.Remote.Addr().Unmap() != addrB {
		t.Fatalf("tracker handed over %s, want gobgpd A's accepted socket from %s", ref, addrB)
	}
	// The exact 4-tuple lookup finds the same socket.
	est, err := sockets.Finder{PID: a.PID}.Established(ref.Local, ref.Remote)
	if err != nil || est.Inode != ref.Inode {
		t.Fatalf("4-tuple lookup: %s, %v; tracker had inode %d", est, err, ref.Inode)
	}
	// The accepted socket is usable through the handle.
	if err := up.Sock.Do(func(fd int) error {
		ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil && ti.State != unix.BPF_TCP_ESTABLISHED {
			return errors.New("accepted socket not in TCP_ESTABLISHED")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	est1 := lab.WaitPeer(t, a.Speaker, addrB, 10*time.Second, bgp.PeerInfo.Established)
	if est1.Uptime.IsZero() {
		t.Errorf("established peer without uptime: %+v", est1)
	}

	// A peer without the key is refused: A's kernel drops its SYN
	// (TCPMD5NotFound) and it never gets an answer.
	notFound := tcpExt(t, a.PID, "TCPMD5NotFound")
	if c, err := lab.DialFrom(nsB, netip.AddrPortFrom(addrA, 179), 500*time.Millisecond, nil); err == nil {
		c.Close()
		t.Fatal("connection without the MD5 key was accepted by gobgpd's keyed listener")
	} else if !lab.Unanswered(err) {
		t.Fatalf("dial without key: %v (want a timeout)", err)
	}
	if n := tcpExt(t, a.PID, "TCPMD5NotFound"); n <= notFound {
		t.Fatalf("A's kernel did not count the unsigned SYN as dropped: TCPMD5NotFound %d -> %d", notFound, n)
	}

	// Guard: a step on a healthy session passes; a step during which the
	// session is reset is reported as a drop against that step.
	g := bgp.NewGuard(a.Speaker, nil)
	keyB := peer.KeyOf(addrB, "")
	if err := g.Before(ctx, keyB, "noop"); err != nil {
		t.Fatalf("guard on a healthy session: %v", err)
	}
	if err := g.After(ctx, keyB, "noop"); err != nil {
		t.Fatalf("guard on a healthy session: %v", err)
	}
	if err := g.Before(ctx, keyB, "reset-during-step"); err != nil {
		t.Fatalf("guard before the reset: %v", err)
	}
	if err := a.Speaker.ResetPeer(ctx, keyB, "aokeyd test"); err != nil {
		t.Fatal(err)
	}
	lab.WaitPeer(t, a.Speaker, addrB, 10*time.Second, func(p bgp.PeerInfo) bool { return !p.Established() || p.Flops > est1.Flops })
	err = g.After(ctx, keyB, "reset-during-step")
	var drop *bgp.DropError
	if !errors.As(err, &drop) || drop.Step != "reset-during-step" {
		t.Fatalf("guard after a reset: %v, want a DropError for the step", err)
	}
	t.Logf("guard: %v", drop)

	// The tracker says the session went down, then hands over the new
	// accepted socket (re-discovered: another inode).
	if d := obs.WaitDown(t, 30*time.Second); d.Neighbor != addrB {
		t.Fatalf("OnDown for %s", d.Neighbor)
	}
	up2 := obs.WaitUp(t, 60*time.Second)
	if up2.Sock.Ref().Inode == ref.Inode {
		t.Fatalf("re-established session handed over with the old socket %s", ref)
	}
	t.Logf("re-established on %s", up2.Sock.Ref())
}

// tcpExt is counter name of the TcpExt line in /proc/PID/net/netstat: the
// kernel's count in pid's network namespace.
func tcpExt(t *testing.T, pid int, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/netstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(vals) != len(names) {
			continue
		}
		for j, n := range names {
			if n == name {
				v, err := strconv.ParseUint(vals[j], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatalf("no TcpExt counter %s in /proc/%d/net/netstat", name, pid)
	return 0
}
