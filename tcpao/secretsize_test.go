package tcpao

import (
	"runtime"
	"testing"
)

// TestSecretCopySize: a secret's copy takes the smallest of the heap's size
// classes that holds it, not MaxKeyLen bytes whatever its length (a daemon
// holds one per key per peer: 16,384 at 4,096 peers x 4 keys).
func TestSecretCopySize(t *testing.T) {
	const copies = 4096
	// A GC before each reading returns the cached spans, so that
	// TotalAlloc counts the objects, not the spans taken for them.
	read := func(ms *runtime.MemStats) {
		runtime.GC()
		runtime.ReadMemStats(ms)
	}
	for _, tt := range []struct{ n, want int }{{1, 16}, {16, 16}, {20, 24}, {26, 32}, {32, 32}, {40, 48}, {64, 64}, {65, 80}, {MaxKeyLen, 80}} {
		keep := make([][]byte, copies) // held, so that nothing is freed and reused between the readings
		var before, after runtime.MemStats
		read(&before)
		for i := range keep {
			keep[i] = secretBuf(tt.n)
		}
		read(&after)
		// (The collections allocate a few KiB of their own: 4 bytes a copy
		// of slack, under the 8 between two size classes.)
		if got := int(after.TotalAlloc-before.TotalAlloc) / copies; got > tt.want+4 {
			t.Errorf("a copy of %d bytes takes %d bytes of heap, want %d", tt.n, got, tt.want)
		}
		for _, b := range keep {
			if len(b) != tt.n || cap(b) != tt.n {
				t.Fatalf("secretBuf(%d): len %d cap %d", tt.n, len(b), cap(b))
			}
		}
	}
}
