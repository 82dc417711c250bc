//go:build linux

package sockets

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// listenMPTCP is a loopback listener in this process made as Go 1.24 and
// later make one by default where the kernel has CONFIG_MPTCP, with its
// descriptor number; ok false on a kernel without MPTCP.
func listenMPTCP(t *testing.T) (ln net.Listener, fd int, ok bool) {
	t.Helper()
	ln, _, fd, proto := testkit.ListenLoopback(t, true)
	if proto != unix.IPPROTO_MPTCP {
		t.Logf("this kernel has no Multipath TCP (the listener is protocol %d)", proto)
		return ln, fd, false
	}
	return ln, fd, true
}

// A speaker listening with Multipath TCP is never "no listener": where
// the listener dump lists a socket on the port that none of the speaker's
// descriptors is (the subflow of an MPTCP listener, on a kernel that
// gives it an inode of its own), Listeners finds the MPTCP listener among
// the speaker's descriptors and answers an *MPTCPError naming the
// process, the descriptor and the address, which matches tcpao.ErrMPTCP.
// The dump is injected so that the case runs on this host's kernel, which
// gives the subflow the descriptor's inode (TestListenersMPTCPFound).
func TestListenersMPTCPUnowned(t *testing.T) {
	ln, fd, ok := listenMPTCP(t)
	if !ok {
		return // not skipped: a guest run fails on skips
	}
	local := netip.MustParseAddrPort(ln.Addr().String())
	plain, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plainPort := netip.MustParseAddrPort(plain.Addr().String()).Port()
	for _, tc := range []struct {
		name   string
		port   uint16
		listed []Socket // the dump's answer
		want   bool     // an *MPTCPError for ln
	}{
		{name: "subflow with an inode of its own", port: local.Port(), want: true,
			listed: []Socket{{Family: afInet, State: StateListen, Local: local, Inode: 1<<40 + 1}}},
		{name: "any port", port: 0, want: true,
			listed: []Socket{{Family: afInet, State: StateListen, Local: local, Inode: 1<<40 + 1}}},
		{name: "nothing listed on the port: no scan", port: local.Port(),
			listed: []Socket{{Family: afInet, State: StateListen, Local: netip.MustParseAddrPort("127.0.0.1:1"), Inode: 1<<40 + 1}}},
		{name: "another port's unowned listener", port: plainPort,
			listed: []Socket{{Family: afInet, State: StateListen, Local: netip.AddrPortFrom(local.Addr(), plainPort), Inode: 1<<40 + 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dump := func(*Diag) ([]Socket, error) { return tc.listed, nil }
			refs, err := Finder{PID: os.Getpid()}.listeners(dump, tc.port)
			if !tc.want {
				if err != nil || len(refs) != 0 {
					t.Fatalf("Listeners(%d) = %v, %v; want none and no error", tc.port, refs, err)
				}
				return
			}
			var me *MPTCPError
			if !errors.As(err, &me) || !errors.Is(err, tcpao.ErrMPTCP) || len(refs) != 0 {
				t.Fatalf("Listeners(%d) = %v, %v; want an *MPTCPError matching tcpao.ErrMPTCP", tc.port, refs, err)
			}
			if me.PID != os.Getpid() || me.FD != fd || me.Local != local || me.Comm == "" {
				t.Errorf("MPTCPError %+v, want pid %d fd %d local %s and the command name", *me, os.Getpid(), fd, local)
			}
			for _, want := range []string{me.Comm, "pid " + strconv.Itoa(os.Getpid()), local.String(), "Multipath TCP", tcpao.ErrMPTCP.Error()} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// On a kernel that gives an MPTCP listener's subflow the descriptor's
// inode (this host's 6.18), Listeners finds the listener as any other, and
// what refuses is its keys: the borrowed descriptor answers tcpao.ErrMPTCP.
// Either way a speaker's MPTCP listener ends in tcpao.ErrMPTCP, never in an
// empty list.
func TestListenersMPTCPFound(t *testing.T) {
	ln, _, ok := listenMPTCP(t)
	if !ok {
		return
	}
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()
	refs, err := Finder{PID: os.Getpid()}.Listeners(port)
	if errors.Is(err, tcpao.ErrMPTCP) {
		t.Logf("this kernel lists the subflow under an inode of its own: %v", err)
		return
	}
	if err != nil || len(refs) != 1 {
		t.Fatalf("Listeners(%d) = %v, %v; want the listener or tcpao.ErrMPTCP", port, refs, err)
	}
	err = WithSocket(refs[0], func(fd int) error { _, err := tcpao.FromFD(fd).Info(); return err })
	if !errors.Is(err, tcpao.ErrMPTCP) {
		t.Fatalf("Info on the borrowed MPTCP listener = %v, want tcpao.ErrMPTCP", err)
	}
}

// The scan itself: the MPTCP listener on the port, none on a port where
// only plain TCP listens, and none for a process that is gone.
func TestMPTCPListenerScan(t *testing.T) {
	ln, fd, ok := listenMPTCP(t)
	if !ok {
		return
	}
	local := netip.MustParseAddrPort(ln.Addr().String())
	plain, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var me *MPTCPError
	if err := mptcpListener(os.Getpid(), local.Port()); !errors.As(err, &me) || me.FD != fd || me.Local != local {
		t.Errorf("scan for port %d = %v, want fd %d on %s", local.Port(), err, fd, local)
	}
	if err := mptcpListener(os.Getpid(), netip.MustParseAddrPort(plain.Addr().String()).Port()); err != nil {
		t.Errorf("scan for a plain TCP listener's port = %v, want nil", err)
	}
	if err := mptcpListener(1<<30, local.Port()); err == nil || errors.Is(err, tcpao.ErrMPTCP) {
		t.Errorf("scan of no process = %v, want its error", err)
	}
}
