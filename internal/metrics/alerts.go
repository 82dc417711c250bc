package metrics

import (
	"math"
	"time"
)

// SetRollAttempts records the peer's aborted attempts since its last
// completed roll (rotator.Status.Attempts) and the last abort's reason
// word ("" when none); the peer keeps one series, whose reason label
// follows the latest abort. The shipped alert for a roll stalled past the
// switch timeout fires on reason "switch-timeout".
func (m *Metrics) SetRollAttempts(p Peer, attempts int, reason string) {
	if attempts == 0 {
		reason = ""
	}
	m.peers.setAttempts(p, float64(attempts), reason)
}

// SetSendCoverageEnd records when the peer runs out of keys to send with
// (zero: never, exported as +Inf).
func (m *Metrics) SetSendCoverageEnd(p Peer, end time.Time) {
	v := math.Inf(1)
	if !end.IsZero() {
		v = unixSeconds(end)
	}
	m.peers.setCoverage(p, v)
}
