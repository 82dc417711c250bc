//go:build linux

package tcpao

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// classifyMPTCP with the socket's SO_PROTOCOL injected, so that every case
// runs on any kernel: only a TCP-level option's ENOPROTOOPT (setsockopt) or
// EOPNOTSUPP (getsockopt) on a socket whose protocol is IPPROTO_MPTCP
// becomes ErrMPTCP, still wrapping the errno; the same errno on a TCP
// socket stays what it was (a kernel without CONFIG_TCP_AO), and so does
// any other errno, or a socket whose protocol cannot be read.
func TestClassifyMPTCP(t *testing.T) {
	protoErr := errors.New("no SO_PROTOCOL")
	for _, tc := range []struct {
		name     string
		errno    error
		proto    int
		protoErr error
		want     error // errors.Is the result, besides the errno
		mptcp    bool
	}{
		{name: "set on MPTCP", errno: unix.ENOPROTOOPT, proto: unix.IPPROTO_MPTCP, want: ErrMPTCP, mptcp: true},
		{name: "get on MPTCP", errno: unix.EOPNOTSUPP, proto: unix.IPPROTO_MPTCP, want: ErrMPTCP, mptcp: true},
		{name: "no CONFIG_TCP_AO", errno: unix.ENOPROTOOPT, proto: unix.IPPROTO_TCP, want: unix.ENOPROTOOPT},
		{name: "EOPNOTSUPP on TCP", errno: unix.EOPNOTSUPP, proto: unix.IPPROTO_TCP, want: unix.EOPNOTSUPP},
		{name: "other errno on MPTCP", errno: unix.ENOENT, proto: unix.IPPROTO_MPTCP, want: unix.ENOENT},
		{name: "EINVAL on MPTCP", errno: unix.EINVAL, proto: unix.IPPROTO_MPTCP, want: unix.EINVAL},
		{name: "protocol unreadable", errno: unix.ENOPROTOOPT, protoErr: protoErr, want: unix.ENOPROTOOPT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			protocol := func(fd int) (int, error) {
				asked++
				if fd != 42 {
					t.Errorf("SO_PROTOCOL read on fd %d, want 42", fd)
				}
				return tc.proto, tc.protoErr
			}
			in := os.NewSyscallError("setsockopt(TCP_AO_ADD_KEY)", tc.errno)
			err := classifyMPTCPBy(protocol, 42, in)
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
				t.Fatalf("classifyMPTCP(%v) = %v, want it to match %v and %v", in, err, tc.want, tc.errno)
			}
			if got := errors.Is(err, ErrMPTCP); got != tc.mptcp {
				t.Errorf("classifyMPTCP(%v) = %v: ErrMPTCP %v, want %v", in, err, got, tc.mptcp)
			}
			if errors.Is(err, ErrNoKernelSupport) {
				t.Errorf("classifyMPTCP(%v) = %v blames the kernel build", in, err)
			}
			if tc.mptcp && err.Error() != ErrMPTCP.Error()+" ("+in.Error()+")" {
				t.Errorf("classifyMPTCP = %q, want the sentinel's line and the failed call", err)
			}
			// Only the two errnos an MPTCP socket answers cost the
			// SO_PROTOCOL read: every other error stays as cheap as before.
			wantAsked := 0
			if errors.Is(tc.errno, unix.ENOPROTOOPT) || errors.Is(tc.errno, unix.EOPNOTSUPP) {
				wantAsked = 1
			}
			if asked != wantAsked {
				t.Errorf("SO_PROTOCOL read %d times, want %d", asked, wantAsked)
			}
		})
	}
	if err := classifyMPTCP(42, nil); err != nil {
		t.Errorf("classifyMPTCP(nil) = %v", err)
	}
}
