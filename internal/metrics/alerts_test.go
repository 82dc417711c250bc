package metrics

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRollStalledSeries: one series per peer with the number of aborted
// attempts since the last completed roll, labelled with the last abort's
// reason; the reason label follows the latest abort.
func TestRollStalledSeries(t *testing.T) {
	m, _ := newTest(t)
	reg := m.Gatherer()
	p := Peer{Addr: "192.0.2.2"}
	m.SetRollAttempts(p, 0, "")
	m.SetRollAttempts(p, 1, "guard-refused")
	m.SetRollAttempts(p, 3, "switch-timeout")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aokeyd_rotation_failed_attempts Aborted attempts of the peer's roll since its last completed roll (0: none), labelled with the last abort's reason.
# TYPE aokeyd_rotation_failed_attempts gauge
aokeyd_rotation_failed_attempts{peer="192.0.2.2",reason="switch-timeout",vrf=""} 3
`), NameRotationFailedAttempts); err != nil {
		t.Fatal(err)
	}
	m.SetRollAttempts(p, 0, "")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aokeyd_rotation_failed_attempts Aborted attempts of the peer's roll since its last completed roll (0: none), labelled with the last abort's reason.
# TYPE aokeyd_rotation_failed_attempts gauge
aokeyd_rotation_failed_attempts{peer="192.0.2.2",reason="",vrf=""} 0
`), NameRotationFailedAttempts); err != nil {
		t.Errorf("after a completed roll: %v", err)
	}
	if n := series(t, reg, LabelReason, "switch-timeout"); n != 0 {
		t.Errorf("the old reason's series survived: %d", n)
	}
	m.DeletePeer(p)
	if n := series(t, reg, LabelPeer, p.Addr); n != 0 {
		t.Errorf("after DeletePeer: %d series", n)
	}
}

// TestSendCoverageEnd: the instant the peer runs out of keys to send with,
// +Inf when it never does.
func TestSendCoverageEnd(t *testing.T) {
	m, _ := newTest(t)
	reg := m.Gatherer()
	a, b := Peer{Addr: "192.0.2.2"}, Peer{Addr: "192.0.2.3", VRF: "blue"}
	m.SetSendCoverageEnd(a, time.Unix(1800000000, 0))
	m.SetSendCoverageEnd(b, time.Time{})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aokeyd_peer_send_coverage_end_timestamp_seconds Unix time from which the peer has no key to send with (the end of continuous send-lifetime coverage from now; +Inf: never).
# TYPE aokeyd_peer_send_coverage_end_timestamp_seconds gauge
aokeyd_peer_send_coverage_end_timestamp_seconds{peer="192.0.2.2",vrf=""} 1.8e+09
aokeyd_peer_send_coverage_end_timestamp_seconds{peer="192.0.2.3",vrf="blue"} +Inf
`), NameSendCoverageEnd); err != nil {
		t.Fatal(err)
	}
	m.DeletePeer(a)
	if n := series(t, reg, LabelPeer, a.Addr); n != 0 {
		t.Errorf("after DeletePeer: %d series", n)
	}
}

// TestAlertRulesNeedNoPerKey: the shipped alert rules read only families
// aokeyd exports by default; one off without metrics.per_key would leave
// its alert silent on every router that did not turn it on.
func TestAlertRulesNeedNoPerKey(t *testing.T) {
	rules, err := os.ReadFile("../../deploy/prometheus/aokeyd-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range PerKeyFamilies() {
		if strings.Contains(string(rules), name) {
			t.Errorf("aokeyd-rules.yml reads %s, exported only with metrics.per_key", name)
		}
	}
	for _, name := range []string{NameRotationFailedAttempts, NameSocketPktBad, NameSocketPktKeyNotFound, NamePeerVerifyFailing,
		NamePeerKeyNotFound, NameSendCoverageEnd, NameKeysKept} {
		if !strings.Contains(string(rules), name) {
			t.Errorf("aokeyd-rules.yml no longer reads %s: is this list out of date?", name)
		}
	}
}
