package daemon

import (
	"sync"

	"github.com/aokeyd/aokeyd/rotator"
)

// handovers runs the take-over of each new session (its accepted socket's
// check and its rotation machine's start) in a goroutine of its own,
// beside the speaker's next events.
//
// Why: the check deletes every key the kernel copied to the accepted
// socket that is not the peer's, one TCP_AO_DEL_KEY each, and on an
// established socket each delete waits for an RCU grace period
// (synchronize_rcu). Where many peers' keys cover one address (a dense
// peering LAN's covering prefixes during a migration) an accepted socket
// takes a hundred and more of them: in the guest one session's check took
// 1.5 to 3.5 s (81 to 197 deletes), and run in the tracker's goroutine the
// next session waited for it, so 200 sessions re-established within 3 s
// were taken over at about 24 a minute. Concurrent checks share the
// kernel's grace periods.
//
// Invariants: one take-over at a time per peer (a session event during
// one asks for another after it; takeOver reads the peer's latest state,
// so a later session is never shadowed by an earlier one); wait returns
// once none runs and none can start (the tracker has stopped first).
type handovers struct {
	mu      sync.Mutex
	running map[rotator.PeerID]bool // false: one more asked for while it ran
	wg      sync.WaitGroup
}

// start runs fn for peer in a goroutine, or, while one runs for peer,
// once more after it.
func (h *handovers) start(peer rotator.PeerID, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running == nil {
		h.running = map[rotator.PeerID]bool{}
	}
	if _, busy := h.running[peer]; busy {
		h.running[peer] = false
		return
	}
	h.running[peer] = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			fn()
			h.mu.Lock()
			if h.running[peer] {
				delete(h.running, peer)
				h.mu.Unlock()
				return
			}
			h.running[peer] = true // the one asked for meanwhile
			h.mu.Unlock()
		}
	}()
}

// wait returns once every take-over started has ended.
func (h *handovers) wait() { h.wg.Wait() }
