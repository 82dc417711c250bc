package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The rotations_aborted_total reason label comes from the abort event's
// typed AbortReason, never from an abort's text: each text here would have
// been counted under another reason by searching it for "session",
// "dropped" or "failed".
func TestAbortMetricLabelFromReason(t *testing.T) {
	cases := []struct {
		reason rotator.AbortReason
		text   string // what the abort said: never read for the label
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
			m, err := metrics.New(reg, metrics.Options{PerKey: true})
			if err != nil {
				t.Fatal(err)
			}
			d := eventDaemon(t, m)
			for i := 1; i <= 2; i++ {
				d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollStarted})
				d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollAborted, Reason: c.reason, Attempts: i, LastAbortReason: c.reason})
			}
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

// TestAbortsCountedEachUnderItsReason: aborts between two scrapes are each
// counted under their own reason (the scrape used to count every abort
// since the last one under the last abort's reason, all the status kept),
// a forgotten peer's late event recreates no series, and every attempt
// is counted as started.
func TestAbortsCountedEachUnderItsReason(t *testing.T) {
	m, err := metrics.New(prometheus.NewPedanticRegistry(), metrics.Options{PerKey: true})
	if err != nil {
		t.Fatal(err)
	}
	d := eventDaemon(t, m)
	for i, r := range []rotator.AbortReason{rotator.AbortSwitchTimeout, rotator.AbortGuardRefused, rotator.AbortSwitchTimeout} {
		d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollStarted})
		d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollAborted, Reason: r, Attempts: i + 1, LastAbortReason: r})
	}
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollStarted, Attempts: 3, LastAbortReason: rotator.AbortSwitchTimeout})
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventRollCompleted})
	exp := fmt.Sprintf(`# HELP %[1]s Key rotations aborted, by reason.
# TYPE %[1]s counter
%[1]s{peer="192.0.2.2",reason="guard-refused",vrf=""} 1
%[1]s{peer="192.0.2.2",reason="switch-timeout",vrf=""} 2
`, metrics.NameRotationsAborted)
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(exp), metrics.NameRotationsAborted); err != nil {
		t.Error(err)
	}
	started := fmt.Sprintf(`# HELP %[1]s Key rotations started.
# TYPE %[1]s counter
%[1]s{peer="192.0.2.2",vrf=""} 4
`, metrics.NameRotationsStarted)
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(started), metrics.NameRotationsStarted); err != nil {
		t.Error(err)
	}
	d.rec.forget(testPeer)
	d.stat.rollEvent(rotator.Event{Peer: testPeer, Kind: rotator.EventState, State: rotator.StateSteady})
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(""), metrics.NameRotationsAborted, metrics.NameRotationState); err != nil {
		t.Errorf("a forgotten peer's late event: %v", err)
	}
}

// eventDaemon is a Daemon with the metrics m that knows testPeer: enough
// for rollEvent.
func eventDaemon(t *testing.T, m *metrics.Metrics) *Daemon {
	ctrl := rotator.NewController(rotator.Options{})
	t.Cleanup(ctrl.Close)
	co := newCore(Options{Metrics: m, Logger: slog.New(slog.DiscardHandler)}, nil, nil, nil, nil)
	co.ctrl = ctrl
	co.table.updatePeer(testPeer, func(*peerState) {})
	return wire(co)
}
