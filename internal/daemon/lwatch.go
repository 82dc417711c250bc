package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
)

// defaultListenerPoll is Options.ListenerPoll's default. It is not an
// aokeyd.yaml setting: it bounds how long a new listener of the speaker
// stays unkeyed, and a second costs one sock_diag dump of the listeners.
const defaultListenerPoll = time.Second

// The listener watch. A speaker aokeyd keys from outside (FRR's bgpd,
// gobgpd) opens a listening socket with no key, and the kernel accepts an
// unsigned SYN from a peer's address on a listener with no key for that
// peer: until a full pass's syncListeners finds the listener, a session
// with whoever sent one could be completed. Nothing else tells the daemon
// of a new listener (bgpd restarted, or its BGP instance configured
// through vtysh seconds after bgpd came up: no session event, no input
// change), so without the watch it waited for the next resync (30 s).
//
// The invariant: a change in the set of listening sockets on the
// speaker's port that the watch observes is followed by a full pass that
// starts after the observation (resync: at most maxPace later), and so by
// a listener sync that sees the new listener. The first observation is
// taken before the first pass (Run), so no listener opened after it goes
// unnoticed. The window shrinks to a poll and a pass; it does not close.
// Keying the socket inside listen() closes it: under aokeyd exec the
// listen guard does (listen.go), and the watch is the backstop there: it
// finds such a listener keyed already, and the pass it asks for plans
// nothing on it. A speaker not under aokeyd exec has the window.
//
// The set is listed in the network namespace of the speaker as the last
// listener sync found it (the pid of its listeners; 0, the daemon's own
// namespace, before any was found). A pid whose namespace cannot be
// listed (the process is gone) asks for one pass when the listing starts
// failing, not one per poll, and the watch lists the daemon's own
// namespace until a sync finds the speaker under another pid.
type listenerWatch struct {
	mu  sync.Mutex
	pid int // the speaker's pid as the last listener sync found it (0: none yet)
	bad int // a pid whose namespace could not be listed: watched as 0 instead

	// The watch's own (Run's first observation, then its goroutine's).
	last    []uint64 // the inodes of the last successful listing
	seen    bool     // last holds a listing
	failing bool     // the last listing failed
}

// found records the speaker's pid a listener sync found listeners under.
func (w *listenerWatch) found(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pid = pid
}

// target is the pid whose namespace the watch lists.
func (w *listenerWatch) target() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pid == w.bad {
		return 0
	}
	return w.pid
}

// observe takes one listing of pid's namespace and reports whether it
// asks for a full pass: the set changed since the last listing (the
// first only records), or the listing started failing.
func (w *listenerWatch) observe(pid int, inodes []uint64, err error) (pass bool) {
	if err != nil {
		if pid != 0 {
			w.mu.Lock()
			w.bad = pid
			w.mu.Unlock()
		}
		pass = !w.failing
		w.failing = true
		return pass
	}
	w.failing = false
	if !w.seen {
		w.last, w.seen = inodes, true
		return false
	}
	if slices.Equal(inodes, w.last) {
		return false
	}
	w.last = inodes
	return true
}

// pollListeners lists the listeners once and asks for a full pass when
// the listing asks for one (listenerWatch.observe).
func (rc *reconciler) pollListeners(ll bgp.ListenerLister) {
	pid := rc.lwatch.target()
	inodes, err := ll.ListenerInodes(pid, rc.o.ListenPort)
	if !rc.lwatch.observe(pid, inodes, err) {
		return
	}
	if err != nil {
		rc.log.Warn("listing the listening sockets failed; syncing the listeners now, and watching aokeyd's own network namespace until a sync finds the speaker",
			"port", rc.o.ListenPort, "pid", pid, "err", err)
	} else {
		rc.log.Info("the listening sockets changed; syncing the listeners now", "port", rc.o.ListenPort, "pid", pid, "listeners", len(inodes))
	}
	rc.resync()
}

// watchListeners polls the listeners every ListenerPoll until ctx ends.
func (rc *reconciler) watchListeners(ctx context.Context, ll bgp.ListenerLister) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(rc.o.ListenerPoll):
		}
		rc.pollListeners(ll)
	}
}
