package daemon

import (
	"errors"
	"testing"
)

// TestListenerWatchSteps: the watch's decisions, listing by listing. The
// first listing only records; a change asks for a pass, the same set
// none; a pid whose namespace cannot be listed (the speaker gone) asks
// for one pass when the listing starts failing, not one per poll, and is
// watched as 0 (the daemon's own namespace) until a listener sync finds
// the speaker under another pid: a sync that finds the same pid again
// (its namespace unreadable, the process alive) does not bring it back.
func TestListenerWatchSteps(t *testing.T) {
	var w listenerWatch
	gone := errors.New("no such process")
	step := func(what string, inodes []uint64, err error, wantPass bool, wantTarget int) {
		t.Helper()
		pid := w.target()
		if got := w.observe(pid, inodes, err); got != wantPass {
			t.Errorf("%s: pass %t, want %t", what, got, wantPass)
		}
		if got := w.target(); got != wantTarget {
			t.Errorf("%s: then watching pid %d, want %d", what, got, wantTarget)
		}
	}
	step("first listing, nothing known", []uint64{7}, nil, false, 0)
	step("the same", []uint64{7}, nil, false, 0)
	w.found(42)
	step("the speaker's namespace, the same set", []uint64{7}, nil, false, 42)
	step("a listener opened", []uint64{7, 9}, nil, true, 42)
	step("the same again", []uint64{7, 9}, nil, false, 42)
	step("a listener closed", []uint64{9}, nil, true, 42)
	step("the speaker gone", nil, gone, true, 0)
	step("own namespace, the restarted speaker's listener not there yet", nil, nil, true, 0)
	step("own namespace, no change", nil, nil, false, 0)
	w.found(42)
	if got := w.target(); got != 0 {
		t.Errorf("a sync found the failing pid again: watching %d, want 0", got)
	}
	w.found(43)
	step("the new process's namespace: its listener", []uint64{11}, nil, true, 43)
	step("its namespace unreadable", nil, gone, true, 0)
	step("own namespace unreadable too", nil, gone, false, 0)
	step("and still", nil, gone, false, 0)
	step("readable again, the same set", []uint64{11}, nil, false, 0)
}
