package testkit

import (
	"runtime"
	"sync/atomic"
)

// CollectGarbage runs two garbage collections and waits until the
// finalizers the first one queued have run (the finalizer goroutine runs
// them in order, one at a time: once one queued by the second collection
// ran, all of the first's have). It reports false if they did not run
// within many scheduler rounds. It works inside a synctest bubble, which
// the finalizer goroutine is not part of: it only polls.
func CollectGarbage() bool {
	for range 2 {
		var ran atomic.Bool
		sentinel := new([16]byte)
		runtime.SetFinalizer(sentinel, func(*[16]byte) { ran.Store(true) })
		sentinel = nil
		runtime.GC()
		for i := 0; !ran.Load(); i++ {
			if i == 10_000_000 {
				return false
			}
			runtime.Gosched()
		}
	}
	return true
}

// LiveHeap is the Go heap's live objects in bytes (HeapAlloc) after a
// garbage collection: what a size or retention test compares.
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
