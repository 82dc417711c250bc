//go:build linux

package testkit

import (
	"crypto/rand"
	"runtime"
	"testing"
)

// TestCountInMemory: a copy made and then wiped is counted, then not; a
// copy in freed memory still is; the needle's own halves are not.
func TestCountInMemory(t *testing.T) {
	// A tail of its own per run: -count=N runs leave copies in freed memory.
	nd := Needle{Head: []byte("memscan-needle-"), Tail: []byte(rand.Text())}
	count := func() int {
		t.Helper()
		c, err := CountInMemory(nd)
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	base := count()
	if base != 0 {
		t.Fatalf("%d copies before any was made", base)
	}
	held := make([][]byte, 3)
	for i := range held {
		held[i] = append(append(make([]byte, 0, 64), nd.Head...), nd.Tail...)
	}
	if got := count() - base; got != 3 {
		t.Errorf("%d copies of the 3 held", got)
	}
	for _, b := range held {
		clear(b)
	}
	if got := count() - base; got != 0 {
		t.Errorf("%d copies after wiping them", got)
	}
	// A copy dropped without wiping stays in memory after collection.
	func() {
		b := append(append(make([]byte, 0, 4096), nd.Head...), nd.Tail...)
		runtime.KeepAlive(b)
	}()
	runtime.GC()
	if got := count() - base; got != 1 {
		t.Errorf("%d copies of a dropped buffer after GC, want 1 (the GC does not wipe)", got)
	}
	// Copies straddling the scanner's 1 MiB chunks are counted once each.
	before := count()
	big := make([]byte, 3<<20)
	for off := (1 << 20) - 10; off < len(big)-64; off += 1 << 20 {
		copy(big[off:], nd.Head)
		copy(big[off+len(nd.Head):], nd.Tail)
	}
	if got := count() - before; got != 2 {
		t.Errorf("%d more copies, want the 2 written across chunk boundaries", got)
	}
	clear(big)
}
