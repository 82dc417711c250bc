package refit

import (
	"maps"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestMapReleasesThePeak: a map grown to many entries and emptied to a
// few keeps its buckets; Map's copy holds the few alone, and the same
// entries.
func TestMapReleasesThePeak(t *testing.T) {
	const peak, left = 1 << 16, 16
	m := make(map[int]int)
	for i := range peak {
		m[i] = i
	}
	for i := left; i < peak; i++ {
		delete(m, i)
	}
	base := testkit.LiveHeap()
	out := Map(m)
	if !maps.Equal(out, m) {
		t.Fatalf("Map changed the entries: %d of %d", len(out), len(m))
	}
	m = nil
	if after := testkit.LiveHeap(); after >= base {
		t.Errorf("live heap %d bytes with the remade map, %d with the grown one: want less", after, base)
	}
	_ = out[0]
}
