package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// aoctl status says where the peer's aoctl rotate stands: rolling to its
// key, holding it ahead of the schedule, or ended before the schedule
// reached it, why, and that nothing is retried.
func TestStatusShowsEarlyRoll(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k2 := control.KeyName{Chain: "core", Name: "2026-12", SendID: 2, RecvID: 102}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		er   control.EarlyRoll
		want string
	}{
		{control.EarlyRoll{Key: k2, KeyStart: start, AskedAt: now.Add(-time.Minute), State: control.EarlyRolling},
			"  aoctl rotate (asked 2026-11-30T11:59:00Z (1m ago)): rolling to core/2026-12 ahead of its send start 2026-12-01T00:00:00Z (in 12h)\n"},
		{control.EarlyRoll{Key: k2, KeyStart: start, AskedAt: now.Add(-time.Hour), State: control.EarlyHeld},
			"  aoctl rotate (asked 2026-11-30T11:00:00Z (1h ago)): rolled to core/2026-12; sending with it ahead of the schedule, which sends with it from 2026-12-01T00:00:00Z (in 12h)\n"},
		{control.EarlyRoll{Key: k2, KeyStart: start, AskedAt: now.Add(-3 * time.Minute), State: control.EarlyEnded, EndedAt: now.Add(-time.Minute),
			Ended: "the roll to it aborted (switch-timeout)"},
			"  aoctl rotate (asked 2026-11-30T11:57:00Z (3m ago)): the roll to core/2026-12 ended 2026-11-30T11:59:00Z (1m ago): the roll to it aborted (switch-timeout); " +
				"the schedule governs, nothing is retried (aoctl rotate 192.0.2.2 --vrf red asks again)\n"},
	} {
		var b strings.Builder
		er := tc.er
		renderPeer(&b, control.PeerStatus{Peer: "192.0.2.2", VRF: "red", SessionState: "established", Rotation: control.Rotation{State: "steady"}, EarlyRoll: &er}, now)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: status:\n%s\nwant the line\n%s", er.State, b.String(), tc.want)
		}
	}
	var b strings.Builder
	renderPeer(&b, control.PeerStatus{Peer: "192.0.2.2", SessionState: "established"}, now)
	if strings.Contains(b.String(), "aoctl rotate") {
		t.Errorf("status of a peer without aoctl rotate mentions it:\n%s", b.String())
	}
}
