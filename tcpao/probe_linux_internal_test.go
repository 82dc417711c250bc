//go:build linux

package tcpao

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The probe's answer for each way its two calls can end: TCP-AO present
// (ENOENT: no keys on the scratch socket), a kernel without it
// (ENOPROTOOPT: the README's exact line), and every other failure, which
// is a *ProbeError: the kernel could not be asked, and aokeyd must not
// guess. Its one line names the failed call and its error, and what to
// check (seccomp, an LSM, the capabilities). The scratch socket is always
// asked for as IPPROTO_TCP; one that still came out as Multipath TCP
// answers ErrMPTCP, blaming neither the kernel build nor a confinement.
func TestProbeOutcomes(t *testing.T) {
	const noAO = `the running kernel lacks TCP-AO (built without CONFIG_TCP_AO): run aokeyd on Linux 6.7 or later built with CONFIG_TCP_AO=y; ` +
		`see the README section "Kernel requirements" (getsockopt(TCP_AO_INFO): protocol not available)`
	for _, tc := range []struct {
		name      string
		socket    []error // per call: AF_INET, then AF_INET6
		info      error
		infoErr   error // probeInfo's whole error, when not a bare errno
		want      error // nil: no error
		wantText  string
		wantProbe bool // a *ProbeError naming wantText
	}{
		{name: "TCP-AO present", info: unix.ENOENT},
		{name: "TCP-AO present, keys readable", info: nil},
		{name: "no CONFIG_TCP_AO", info: unix.ENOPROTOOPT, want: ErrNoKernelSupport, wantText: noAO},
		{name: "getsockopt EPERM (seccomp)", info: unix.EPERM, want: unix.EPERM, wantProbe: true,
			wantText: "getsockopt(TCP_AO_INFO): operation not permitted"},
		{name: "getsockopt EACCES (LSM)", info: unix.EACCES, want: unix.EACCES, wantProbe: true,
			wantText: "getsockopt(TCP_AO_INFO): permission denied"},
		{name: "getsockopt ENOSYS", info: unix.ENOSYS, want: unix.ENOSYS, wantProbe: true,
			wantText: "getsockopt(TCP_AO_INFO): function not implemented"},
		{name: "socket EPERM", socket: []error{unix.EPERM}, want: unix.EPERM, wantProbe: true,
			wantText: "socket: operation not permitted"},
		{name: "socket EACCES", socket: []error{unix.EACCES}, want: unix.EACCES, wantProbe: true,
			wantText: "socket: permission denied"},
		{name: "no inet family (RestrictAddressFamilies=)", socket: []error{unix.EAFNOSUPPORT, unix.EAFNOSUPPORT},
			want: unix.EAFNOSUPPORT, wantProbe: true, wantText: "socket: address family not supported by protocol"},
		{name: "IPv6 only", socket: []error{unix.EAFNOSUPPORT, nil}, info: unix.ENOENT},
		{name: "socket made MPTCP behind our back", infoErr: fmt.Errorf("%w (%w)", ErrMPTCP,
			os.NewSyscallError("getsockopt(TCP_AO_INFO)", unix.EOPNOTSUPP)), want: ErrMPTCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			socket := func(domain, typ, proto int) (int, error) {
				calls++
				if proto != unix.IPPROTO_TCP {
					t.Errorf("probe socket of protocol %d, want IPPROTO_TCP", proto)
				}
				if calls <= len(tc.socket) && tc.socket[calls-1] != nil {
					return -1, tc.socket[calls-1]
				}
				return unix.Socket(domain, typ, proto)
			}
			info := func(int) error {
				if tc.infoErr != nil {
					return tc.infoErr
				}
				if tc.info == nil {
					return nil
				}
				return os.NewSyscallError("getsockopt(TCP_AO_INFO)", tc.info)
			}
			err := probe(socket, info)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Probe: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Probe: %v, want an error matching %v", err, tc.want)
			}
			if tc.wantText == noAO && err.Error() != noAO {
				t.Errorf("Probe: %q, want the README's line %q", err, noAO)
			}
			var pe *ProbeError
			if isProbe := errors.As(err, &pe); isProbe != tc.wantProbe {
				t.Errorf("Probe: %v is a *ProbeError: %v, want %v", err, isProbe, tc.wantProbe)
			}
			if tc.want == ErrMPTCP && (errors.Is(err, ErrNoKernelSupport) || strings.Contains(err.Error(), "CONFIG_TCP_AO")) {
				t.Errorf("Probe: %v blames the kernel build", err)
			}
			if !tc.wantProbe {
				return
			}
			if errors.Is(err, ErrNoKernelSupport) || strings.Contains(err.Error(), "CONFIG_TCP_AO") {
				t.Errorf("Probe: %v blames the kernel build", err)
			}
			var missing []string
			for _, want := range []string{tc.wantText, "TCP-AO", "seccomp", "SystemCallFilter=", "RestrictAddressFamilies=",
				"LSM", "AppArmor", "SELinux", "capabilities", "Kernel requirements"} {
				if !strings.Contains(err.Error(), want) {
					missing = append(missing, want)
				}
			}
			if len(missing) > 0 || strings.Contains(err.Error(), "\n") {
				t.Errorf("Probe: %q: want one line, lacking none of %q", err, missing)
			}
		})
	}
}
