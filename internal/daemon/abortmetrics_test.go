package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The rotations_aborted_total reason label comes from the roll status's
// AbortReason, not from the abort's text: each text here would have been
// counted under another reason by searching it for "session", "dropped"
// or "failed".
func TestAbortMetricLabelFromReason(t *testing.T) {
	cases := []struct {
		reason rotator.AbortReason
		text   string
		label  string
	}{
		{rotator.AbortSwitchTimeout, "peer did not send with key recv=2; the session dropped its old key? failed", "switch-timeout"},
		{rotator.AbortGuardRefused, "session guard before install: neighbor 192.0.2.2 is Idle", "guard-refused"},
		{rotator.AbortSessionDropped, "install failed: session guard after install: step failed", "session-down"},
		{rotator.AbortKernelError, "announce failed: announce: no such key (the session is fine)", "kernel-error"},
	}
	for _, c := range cases {
		t.Run(c.label, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			d := &Daemon{o: Options{Metrics: m}}
			mp := metrics.Peer{Addr: "192.0.2.2"}
			d.countRolls(mp, rotator.Status{Peer: testPeer}) // the first pass only records
			d.countRolls(mp, rotator.Status{Peer: testPeer, Attempts: 2, LastAbortReason: c.reason, LastAbort: c.text})
			exp := fmt.Sprintf(`# HELP %[1]s Key rotations aborted, by reason.
# TYPE %[1]s counter
%[1]s{peer="192.0.2.2",reason=%[2]q,vrf=""} 2
`, metrics.NameRotationsAborted, c.label)
			if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(exp), metrics.NameRotationsAborted); err != nil {
				t.Error(err)
			}
		})
	}
}
