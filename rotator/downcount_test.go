package rotator

import "testing"

// TestDownWatchComparesPerKey holds the DownWatch's look to a few key
// comparisons per listener key however many sessions are up: a fleet
// shares its chains' IDs, and indexing the sessions' keys by IDs alone
// compared each listener key with every peer's (O(keys x peers) a
// listener sync; 1,024 peers: about 1.5 million comparisons a pass).
func TestDownWatchComparesPerKey(t *testing.T) {
	for _, n := range []int{64, 1024} {
		_, s, carried := fleetListener(n)
		obs, err := Observe(s, ReadFull)
		if err != nil {
			t.Fatal(err)
		}
		var w DownWatch
		w.observe("fleet", &obs, carried)
		w.Peek("fleet", &obs, carried)
		// Each listener key meets the keys of its own peer: three.
		if max := 2 * 3 * len(obs.Keys); w.compared > max {
			t.Errorf("%d peers: %d comparisons for %d listener keys (twice), want at most %d", n, w.compared, len(obs.Keys), max)
		}
	}
}
