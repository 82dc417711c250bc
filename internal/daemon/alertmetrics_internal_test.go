package daemon

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRollAttemptsGauge: the failed-attempts gauge the stalled-roll alert
// reads follows each abort event at once, labelled with the latest abort's
// reason, and drops to 0 with no reason when the roll completes.
func TestRollAttemptsGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := eventDaemon(t, m)
	want := func(reason string, n int) {
		t.Helper()
		exp := fmt.Sprintf(`# HELP %[1]s Aborted attempts of the peer's roll since its last completed roll (0: none), labelled with the last abort's reason.
# TYPE %[1]s gauge
%[1]s{peer="192.0.2.2",reason=%[2]q,vrf=""} %[3]d
`, metrics.NameRotationFailedAttempts, reason, n)
		if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(exp), metrics.NameRotationFailedAttempts); err != nil {
			t.Error(err)
		}
	}
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollAborted, Reason: rotator.AbortSwitchTimeout, Attempts: 1, LastAbortReason: rotator.AbortSwitchTimeout})
	want("switch-timeout", 1)
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollAborted, Reason: rotator.AbortGuardRefused, Attempts: 2, LastAbortReason: rotator.AbortGuardRefused})
	want("guard-refused", 2)
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollAborted, Reason: rotator.AbortSwitchTimeout, Attempts: 3, LastAbortReason: rotator.AbortSwitchTimeout})
	want("switch-timeout", 3)
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollCompleted})
	want("", 0)
}

// testPeer is the peer of the metrics tests' statuses.
var testPeer = peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
