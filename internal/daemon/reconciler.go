package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// reconciler is the reconcile part: the passes (reconcile.go), the
// listener syncs and their TCP-MD5 passwords (md5.go), the keys the
// sessions carry (carried.go), the listener watch (lwatch.go) and the
// sockets held in listen(2) (listen.go). It alone writes the listening
// sockets: a revoke asks it (askListenerRevoke), the listen guard too
// (listenKeys). The fields above mu are the reconcile goroutine's alone
// (run; no lock); the counters are atomic; mu guards what other goroutines
// read, through its methods (listenerKept, listenerFaults, optMem, ...).
type reconciler struct {
	*core
	carried *carriedRecord // what each peer's sessions carry, durably
	lwatch  listenerWatch  // the listener watch's state (lwatch.go)
	exec    *execState     // an Executor's peers (execpass.go; nil: none)
	links   linkWarn       // the interface neighbours' warnings (linklisten.go)

	kick    chan struct{}        // wake: a pass now
	revokes chan *listenerRevoke // a revoke's listener part, applied between passes
	listens chan *listenAsk      // a socket held in listen(2) to key (listen.go)
	done    chan struct{}        // closed when Run returns (stopped)

	// events counts the requests for a full pass with recompute that no
	// version records: Kick (SIGHUP reload, aoctl rotate and revoke, a key
	// refresh asked for). sessions counts what needs a full pass but no
	// recompute: a speaker (re)sync, a session not taken over yet.
	events, sessions       atomic.Uint64
	idlePasses, fullPasses atomic.Uint64
	// keyChanges counts the sessions' key changes (keysChanged): a
	// listener sync compares it across its reads (syncListeners).
	keyChanges atomic.Uint64
	// revoking counts the revokes under way (revocations.revoke, from
	// before their record to their end): no full pass runs meanwhile
	// (reconcile, execPass; revokeUnderWay).
	revoking atomic.Int32
	// trackerSynced: the tracker has reported the speaker's full peer
	// list at least once since the start.
	trackerSynced atomic.Bool
	// gate is the start-up gate's state while it holds, nil once it
	// opened (gate.go).
	gate atomic.Pointer[control.StartUpGate]

	// The inputs of the last full pass, when it ran, and the listeners'
	// desired keys it computed (owning their secrets).
	last         passInputs
	lastSessions uint64 // sessions at the last full pass
	haveLast     bool
	lastFull     time.Time
	lastCost     time.Duration // how long the last full pass took (paces the next: pace)
	want         listenerWant
	md5          md5Want       // the listeners' TCP-MD5 passwords
	md5Ever      bool          // a binding had a TCP-MD5 password: read the listeners' MD5 keys
	frozen       []frozenRange // bindings whose listener keys are not deleted
	retry        bool          // some desired state failed: recompute at the next full pass
	raised       raiseState    // the last RaiseOptMem outcome
	// allRead: since the start, every session up has been read from the
	// kernel once (sessionsRead); until then no listener key is deleted.
	allRead bool
	// down keeps the bases of the listener keys no session up carries
	// (rotator.DownWatch: an edit in place of a key whose peer is down and
	// fails against it takes effect).
	down rotator.DownWatch
	// asks are the sockets held in listen(2) that arrived before the first
	// full pass: its listener sync keys them (listen.go).
	asks []*listenAsk

	mu       sync.Mutex
	nextPass time.Time         // the policy's next time boundary
	optmem   optMemUse         // the listeners' optmem need at the last sync
	kept     []rotator.Held    // what the last listener sync kept
	md5Held  []rotator.MD5Held // TCP-MD5 keys the last listener sync held
	// faults are the listeners the last listener sync that found the
	// listeners (or a Multipath TCP one) could not key (mptcp.go).
	faults []control.ListenerFault
	// editsHeld are the edits in place the last listener sync held back,
	// editsApplied those the syncs applied, while the listeners' desired
	// state holds their material (edits.go).
	editsHeld, editsApplied []rotator.Edit
}

func newReconciler(co *core, carried *carriedRecord) *reconciler {
	return &reconciler{core: co, carried: carried, kick: make(chan struct{}, 1), revokes: make(chan *listenerRevoke), listens: make(chan *listenAsk), done: make(chan struct{})}
}

// askFull asks for a full reconcile pass now: desired state recomputed and
// the listeners re-read from the kernel.
func (rc *reconciler) askFull() {
	rc.events.Add(1)
	rc.wake()
}

// resync asks for a full pass that synchronises the listeners and takes
// over sessions not yet taken over, without recomputing every peer's
// desired state: a session event changes nothing for the other peers (a
// mass take-over must not cost a fleet-wide recompute per session).
func (rc *reconciler) resync() {
	rc.sessions.Add(1)
	rc.wake()
}

// wake runs a pass now; it is a full one only if an input changed or one
// is due.
func (rc *reconciler) wake() {
	select {
	case rc.kick <- struct{}{}:
	default:
	}
}

// passes reports how many reconcile passes have run: idle ones (no input
// changed and no full pass due: nothing computed, nothing read from the
// kernel) and full ones.
func (rc *reconciler) passes() (idle, full uint64) {
	return rc.idlePasses.Load(), rc.fullPasses.Load()
}

// run is the reconcile goroutine (Daemon.Run's own): a pass, then the
// revokes' listener parts and the sockets held in listen(2) that arrive
// before the next pass is due or asked for. It returns when ctx ends,
// leaving every installed key in place.
func (rc *reconciler) run(ctx context.Context) error {
	defer rc.dropListenerWant()
	defer rc.dropShared()
	defer rc.dropAsks() // first: no ask is left waiting once Run returns
	// due is the pass the timer is set for; a pass that asks for the same
	// time again keeps the timer (a new one each pass would cost the
	// runtime a wake-up of its poller, see Run's refresh loop).
	var due time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var next time.Time
		if rc.exec != nil {
			next = rc.execPass(ctx) // no speaker's sessions or listeners to key
		} else {
			next = rc.reconcile(ctx)
		}
		var fire <-chan time.Time // nil: no pass due until woken
		if !next.IsZero() {
			if timer == nil || !next.Equal(due) {
				if timer != nil {
					timer.Stop()
				}
				timer, due = time.NewTimer(max(time.Until(next), 100*time.Millisecond)), next
			}
			fire = timer.C
		}
		for served := true; served; {
			select {
			case <-ctx.Done():
				rc.log.Info("stopping; installed keys stay in place")
				return nil
			case r := <-rc.revokes:
				rc.revokeListeners(r)
				close(r.done)
				continue // the pass the revoke kicks comes after it
			case a := <-rc.listens:
				rc.serveListen(ctx, a)
				continue
			case <-rc.kick:
			case <-fire:
				timer = nil // fired: the next due time sets a new one
			}
			served = false
		}
	}
}

// stopped tells the revokes and the listen guard that the reconcile
// goroutine is gone: their asks are answered at once (Run, once its
// goroutines stopped).
func (rc *reconciler) stopped() { close(rc.done) }

// holdGate makes the start-up gate hold (New: from the start, gate.go).
func (rc *reconciler) holdGate() { rc.gate.Store(&control.StartUpGate{}) }

// speakerSynced is the tracker's word that it reported the speaker's full
// peer list: a pass takes the sessions over and syncs the listeners.
func (rc *reconciler) speakerSynced() {
	rc.trackerSynced.Store(true)
	rc.resync()
}

// optMem is net.core.optmem_max and the listeners' need at the last sync.
func (rc *reconciler) optMem() optMemUse {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.optmem
}

// md5HeldNow is what the last listener sync held of the TCP-MD5 keys.
func (rc *reconciler) md5HeldNow() []rotator.MD5Held {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.md5Held
}

// forget drops a peer that left the speaker's configuration, with its
// metric series.
func (rc *reconciler) forget(id rotator.PeerID) {
	rc.log.Info("peer has no binding any more; forgotten", "peer", id)
	rc.ctrl.Forget(id)
	rc.stat.forgetRolls(id)
	rc.early.forget(id)
	p := rc.table.remove(id)
	rc.stat.forgetPeer(id, p != nil)
}

// syncListenerDeletes is Options.Kernel.SyncListenerDeletes.
func (rc *reconciler) syncListenerDeletes() bool { return rc.o.Kernel.SyncListenerDeletes() }
