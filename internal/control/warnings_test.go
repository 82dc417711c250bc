package control

import (
	"slices"
	"testing"
)

// A Multipath TCP listener is a typed fault (ListenerFault, Reason
// ListenerMPTCP) and one warning per port that names the fix, whatever the
// number of listeners (a speaker's IPv4 and IPv6 ones on 179 are one
// warning); a report without faults has no such warning.
func TestCompleteListenerFaults(t *testing.T) {
	const w179 = "the speaker's listener on port 179 is a Multipath TCP socket (Go 1.24 and later listen with MPTCP by default on kernels with CONFIG_MPTCP): " +
		"TCP-AO cannot be set on it; start the speaker with GODEBUG=multipathtcp=0 (or net.mptcp.enabled=0)"
	const w1179 = "the speaker's listener on port 1179 is a Multipath TCP socket (Go 1.24 and later listen with MPTCP by default on kernels with CONFIG_MPTCP): " +
		"TCP-AO cannot be set on it; start the speaker with GODEBUG=multipathtcp=0 (or net.mptcp.enabled=0)"
	v4 := ListenerFault{Reason: ListenerMPTCP, Local: "0.0.0.0:179", Port: 179, PID: 42, Process: "gobgpd"}
	v6 := ListenerFault{Reason: ListenerMPTCP, Local: "[::]:179", Port: 179, PID: 42, Process: "gobgpd"}
	other := ListenerFault{Reason: ListenerMPTCP, Local: "[::]:1179", Port: 1179, PID: 43}
	for _, tc := range []struct {
		name   string
		faults []ListenerFault
		want   []string
	}{
		{name: "none"},
		{name: "one listener", faults: []ListenerFault{v4}, want: []string{w179}},
		{name: "both families on one port", faults: []ListenerFault{v4, v6}, want: []string{w179}},
		{name: "two ports", faults: []ListenerFault{v6, other}, want: []string{w179, w1179}},
		{name: "a reason this build does not know", faults: []ListenerFault{{Reason: "future", Port: 179}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := StatusReport{ListenerFaults: tc.faults}
			r.Complete()
			r.Complete() // idempotent
			if !slices.Equal(r.Warnings, tc.want) {
				t.Errorf("warnings %q, want %q", r.Warnings, tc.want)
			}
		})
	}
	if got := WarnListenerMPTCP(179); got != w179 {
		t.Errorf("WarnListenerMPTCP(179) = %q, want %q", got, w179)
	}
}
