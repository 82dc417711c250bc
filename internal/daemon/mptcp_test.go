package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// mptcpSocket is a speaker's listening socket that is Multipath TCP while
// refuse holds: every call fails as tcpao fails it on such a socket
// (tcpao.ErrMPTCP wrapping the kernel's errno). Otherwise it is Socket.
type mptcpSocket struct {
	tcpao.Socket
	refuse *atomic.Bool
}

func refused(call string, errno syscall.Errno) error {
	return fmt.Errorf("tcpao: %w (%w)", tcpao.ErrMPTCP, os.NewSyscallError(call, errno))
}

func (s mptcpSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if s.refuse.Load() {
		return refused("setsockopt(TCP_AO_ADD_KEY)", syscall.ENOPROTOOPT)
	}
	return s.Socket.AddKey(k, o)
}

func (s mptcpSocket) DelKey(d tcpao.DelKey) error {
	if s.refuse.Load() {
		return refused("setsockopt(TCP_AO_DEL_KEY)", syscall.ENOPROTOOPT)
	}
	return s.Socket.DelKey(d)
}

func (s mptcpSocket) Info() (tcpao.Info, error) {
	if s.refuse.Load() {
		return tcpao.Info{}, refused("getsockopt(TCP_AO_INFO)", syscall.EOPNOTSUPP)
	}
	return s.Socket.Info()
}

func (s mptcpSocket) SetInfo(c tcpao.InfoChange) error {
	if s.refuse.Load() {
		return refused("getsockopt(TCP_AO_INFO)", syscall.EOPNOTSUPP)
	}
	return s.Socket.SetInfo(c)
}

func (s mptcpSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	if s.refuse.Load() {
		return nil, refused("getsockopt(TCP_AO_GET_KEYS)", syscall.EOPNOTSUPP)
	}
	return s.Socket.Keys(f)
}

// status is the daemon's whole status report.
func (e *env) status() control.StatusReport {
	e.t.Helper()
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		e.t.Fatalf("Status: %v", err)
	}
	return rep
}

// faultsOf are rep's listener faults without their process names (the
// in-memory speaker's pid is no process of this machine).
func faultsOf(rep control.StatusReport) []control.ListenerFault {
	out := slices.Clone(rep.ListenerFaults)
	for i := range out {
		out[i].Process = ""
	}
	return out
}

// A speaker whose listener is Multipath TCP (gobgpd v4 on a kernel with
// CONFIG_MPTCP) is told apart from every other listener failure, by type:
// found by its inode, its keys refused with tcpao.ErrMPTCP, or reported by
// discovery as a *sockets.MPTCPError. Status then holds a ListenerFault of
// reason ListenerMPTCP naming the listener and the pid, with the warning
// that names the fix; the log says the same line once, however many passes
// find it (the first pass runs at start-up), and says when the listener is
// plain TCP again, which clears the fault and the warning.
func TestMPTCPListenerFault(t *testing.T) {
	mptcp := &sockets.MPTCPError{PID: speakerPID, Comm: "gobgpd", FD: 7, Local: netip.MustParseAddrPort("0.0.0.0:179")}
	for _, tc := range []struct {
		name string
		// make makes the speaker's listener MPTCP (on, true) or plain TCP
		// again, and returns the fault status should show.
		make func(e *env, on bool) control.ListenerFault
	}{
		{name: "keys refused", make: func() func(e *env, on bool) control.ListenerFault {
			var refuse atomic.Bool
			local := netip.MustParseAddrPort("[2001:db8::1]:179")
			return func(e *env, on bool) control.ListenerFault {
				if on && !refuse.Load() {
					v6, err := e.net.Socket(local.Addr())
					if err != nil {
						e.t.Fatal(err)
					}
					if err := v6.Listen(); err != nil {
						e.t.Fatal(err)
					}
					e.disc.Add(mptcpSocket{Socket: v6, refuse: &refuse}, local, netip.AddrPort{}, true)
				}
				refuse.Store(on)
				return control.ListenerFault{Reason: control.ListenerMPTCP, Local: local.String(), Port: bgpPort, PID: speakerPID}
			}
		}()},
		{name: "found by discovery", make: func(e *env, on bool) control.ListenerFault {
			if on {
				e.disc.FailListeners(mptcp)
			} else {
				e.disc.FailListeners(nil)
			}
			return control.ListenerFault{Reason: control.ListenerMPTCP, Local: "0.0.0.0:179", Port: bgpPort, PID: speakerPID}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, k1, k2, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
				e.waitKeys("listener", e.lis, ids(k1, k2))
				warn := control.WarnListenerMPTCP(bgpPort)
				want := tc.make(e, true)
				e.d.Kick()
				e.waitFor("the MPTCP listener's fault in status", func() bool {
					return slices.Equal(faultsOf(e.status()), []control.ListenerFault{want})
				})
				rep := e.status()
				if !slices.Contains(rep.Warnings, warn) {
					t.Errorf("status warnings %q, want %q", rep.Warnings, warn)
				}
				if tc.name == "found by discovery" && rep.ListenerFaults[0].Process != "gobgpd" {
					t.Errorf("fault %+v, want the process named", rep.ListenerFaults[0])
				}
				for range 3 {
					e.d.Kick()
					e.quiet(time.Second)
				}
				logs := e.logs.String()
				if n := strings.Count(logs, warn); n != 1 {
					t.Errorf("the log says %q %d times over 4 passes, want once:\n%s", warn, n, logs)
				}
				if strings.Contains(logs, "listening sockets not found") || strings.Contains(logs, "listener sync failed") {
					t.Errorf("the MPTCP listener is logged as another failure too:\n%s", logs)
				}
				tc.make(e, false)
				e.d.Kick()
				e.waitFor("the fault cleared", func() bool { return len(e.status().ListenerFaults) == 0 })
				if rep := e.status(); slices.Contains(rep.Warnings, warn) {
					t.Errorf("status warnings %q still hold %q", rep.Warnings, warn)
				}
				e.waitFor("the log saying the listener is plain TCP", func() bool {
					return strings.Contains(e.logs.String(), "plain TCP now")
				})
			})
		})
	}
}
