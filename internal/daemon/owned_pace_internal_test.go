package daemon

import (
	"testing"
	"time"
)

// TestLedgerWritesPacedByCost: a change waits for its write flushPace
// times what the last write took, at least flushDelay and at most
// flushMax. Every 200 ms, whatever a write cost, the record of a 1,024-peer
// fleet cost aokeyd a fifth of its CPU over a roll in the guest.
func TestLedgerWritesPacedByCost(t *testing.T) {
	for _, tc := range []struct {
		cost, want time.Duration
	}{
		{0, flushDelay},
		{time.Millisecond, flushDelay},
		{40 * time.Millisecond, 800 * time.Millisecond},
		{time.Second, flushMax},
	} {
		l := &ledger{cost: tc.cost}
		if got := l.flushWait(); got != tc.want {
			t.Errorf("last write %v: next after %v, want %v", tc.cost, got, tc.want)
		}
	}
}
