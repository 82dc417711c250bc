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
// reads follows the roll status at once (the first pass too, unlike the
// abort counters, which count the change between passes), and drops to 0
// with no reason when the roll completes.
func TestRollAttemptsGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{o: Options{Metrics: m}}
	mp := metrics.Peer{Addr: "192.0.2.2"}
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
	d.countRolls(mp, rotator.Status{Peer: testPeer, Attempts: 1, LastAbortReason: rotator.AbortSwitchTimeout})
	want("switch-timeout", 1)
	d.countRolls(mp, rotator.Status{Peer: testPeer, Attempts: 3, LastAbortReason: rotator.AbortSwitchTimeout})
	want("switch-timeout", 3)
	d.countRolls(mp, rotator.Status{Peer: testPeer, Rolls: 1})
	want("", 0)
}

// testPeer is the peer of the metrics tests' statuses.
var testPeer = peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
