package rotator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// runner is one peer's machine and its mailbox. The machine has no
// goroutine of its own: a run (Controller.run) steps it until it waits,
// started by a producer's wake, by its wake-up (the controller's wakeups
// are the queue of waiting machines, under one timer), or by Accepted. At
// most one run is under way per runner (running), so the machine is owned
// by whichever goroutine runs it, one at a time, and a machine that waits
// costs a place in a queue, not a goroutine and its stack. Producers reach
// the machine only through the mailbox, which they never wait on, and
// readers see its Status only as the immutable snapshot a run publishes
// (status).
type runner struct {
	c      *Controller
	m      *machine // owned by the run under way
	after  *runner  // the peer's previous machine, in a step: the first run waits for it, then cleans the socket
	status atomic.Pointer[Status]
	next   time.Time // owned by the run: when the machine's next step is due (zero: the first step runs)

	mu      sync.Mutex // guards the mailbox and the run state below; never held across a step
	desired *Desired   // the latest desired state not yet taken (latest wins; the slot's)
	dpos    int        // how many of excl came before desired
	excl    []*exclusive
	running bool // a run is under way
	woken   bool // woken during the run under way: it steps again before it ends
	halted  bool // stopped: no run starts again
	ended   bool // halted with no run under way (doneChan)
	begun   bool // owned by the run: the first run's start-up is done
	// wpos and due are the machine's wake-up in its controller's
	// wakeups (guarded by its mu): its place in the queue (0: none),
	// and when. (Beside the flags, so that a runner fits 144 bytes.)
	wpos int32
	due  int64
	// halting is closed by halt (the runner is its machine's context,
	// Done) and done once ended (doneChan). Both are made when first
	// asked for: most machines run and wait for their whole life without
	// anyone waiting on either (two channels, 192 bytes a peer).
	halting, done chan struct{}
}

// exclusive is an Exclusive call waiting for the runner's goroutine.
type exclusive struct {
	desired *Desired
	fn      func(tcpao.Socket)
	ran     chan struct{} // closed once fn ran and desired was taken
	state   atomic.Int32  // exclQueued, then exclTaken by the runner or exclWithdrawn by the caller
}

const (
	exclQueued int32 = iota
	exclTaken
	exclWithdrawn
)

// poke wakes the machine: a run starts, or the one under way steps again
// before it ends. It never waits.
func (r *runner) poke() {
	if r.begin() {
		go r.c.run(r)
	}
}

// begin is beginLocked under r.mu.
func (r *runner) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.beginLocked()
}

// beginLocked reports whether its caller starts a run (r.mu held): not
// when halted, and not while one is under way, which is told to step
// again.
func (r *runner) beginLocked() bool {
	switch {
	case r.halted:
		return false
	case r.running:
		r.woken = true
		return false
	}
	r.running = true
	return true
}

// halt stops the runner: no run starts again, and it ends at once when
// none is under way, else when that run ends (after its step). It reports
// whether the runner has ended. Idempotent.
func (r *runner) halt() (ended bool) {
	r.mu.Lock()
	if r.halted {
		defer r.mu.Unlock()
		return r.ended
	}
	r.halted = true
	if r.halting != nil {
		close(r.halting)
	}
	r.c.wake.cancel(r)
	if r.running {
		r.mu.Unlock()
		return false // the run under way ends it (run)
	}
	// No run starts once halted: the machine's last touch is this one.
	r.mu.Unlock()
	r.m.stopProbe()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked()
	return r.ended
}

// finishLocked marks the runner ended: once, by halt or by the run that
// was under way when it halted.
func (r *runner) finishLocked() {
	r.ended = true
	if r.done != nil {
		close(r.done)
	}
	r.c.wg.Done()
}

// doneChan is closed once the runner ended (halted with no run under
// way): closedChan when it has, else its done, made now if none asked
// before.
func (r *runner) doneChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return closedChan
	}
	if r.done == nil {
		r.done = make(chan struct{})
	}
	return r.done
}

// The runner is its machine's context (the SessionGuard's calls get it):
// it ends when the runner halts. A context of its own per machine
// (WithCancel, with an AfterFunc for Close) cost ~1 KiB a peer of the
// daemon's heap at 4,096 peers.
// Done's channel is made on the first call (closedChan once halted), so
// successive calls return the same channel.
func (r *runner) Deadline() (time.Time, bool) { return time.Time{}, false }
func (r *runner) Value(any) any               { return nil }
func (r *runner) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.halting == nil {
		if r.halted {
			return closedChan
		}
		r.halting = make(chan struct{})
	}
	return r.halting
}
func (r *runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.halted {
		return context.Canceled
	}
	return nil
}

// waitLocked arms the machine's wake-up d from now (r.mu held, the run
// ending), in its controller's wakeups.
func (r *runner) waitLocked(d time.Duration) {
	r.c.wake.at(r, d)
}

// post puts d in the mailbox (replacing what the machine has not taken
// yet) and wakes the machine.
func (r *runner) post(d *Desired) {
	r.mu.Lock()
	r.desired, r.dpos = d, len(r.excl)
	r.mu.Unlock()
	r.poke()
}

// take empties the mailbox into the machine in the order it was filled:
// the Exclusive calls (each hands its desired state over after fn) and the
// latest SetDesired value where it came among them.
func (r *runner) take(now func() time.Time) {
	r.mu.Lock()
	d, dpos, xs := r.desired, r.dpos, r.excl
	r.desired, r.dpos, r.excl = nil, 0, nil
	r.mu.Unlock()
	for i := 0; i <= len(xs); i++ {
		if d != nil && i == dpos {
			r.m.takeDesired(d, now())
		}
		if i == len(xs) {
			break
		}
		if !xs[i].state.CompareAndSwap(exclQueued, exclTaken) {
			continue // its caller gave up waiting
		}
		r.m.pre = r.exclusive(xs[i])
		r.m.writes++
		r.m.ownWrite(now()) // it may have set Current_key or RNext_key
		r.m.takeDesired(xs[i].desired, now())
	}
}

// exclusive runs x's fn on the socket and reads the socket back in full in
// the same borrow of its descriptor (one pidfd_getfd on bgp's sockets),
// returning the read for the machine's next step (nil when the read, or
// the borrow, failed: the step then reads again). The caller is released
// once the borrow ended, read included: a caller that then has the
// speaker reset the session (a revoke of its only key) must not do so
// while aokeyd holds a duplicate of its descriptor. Where the socket
// cannot be borrowed, fn still runs on it and meets the error itself.
func (r *runner) exclusive(x *exclusive) *Observed {
	ran := false
	obs, oerr, err := writeRead(r.m.sock, ReadFull, r.m.knownKeys(ReadFull), func(bs tcpao.Socket) error {
		x.fn(bs)
		ran = true
		return nil
	})
	if !ran {
		x.fn(r.m.sock)
	}
	close(x.ran)
	if !ran || err != nil || oerr != nil {
		return nil
	}
	return &obs
}

// run steps r's machine until it waits (or is halted), then arms its
// wake-up; the caller set r.running. A wake during a step (running) makes
// the run step again rather than start another, so one goroutine at a
// time touches the machine, and events and Changed stay in order.
func (c *Controller) run(r *runner) {
	// The step's deep path then runs without a stack copy (runstack.go).
	growRunStack()
	r.m.own() // the last run handed its status to the readers
	if !r.begun {
		r.begun = true
		if r.after != nil {
			select {
			case <-r.Done():
			case <-r.after.doneChan():
			}
			r.after = nil
			if r.Err() == nil {
				r.take(time.Now)
				sp, err := Clean(r.m.sock, *r.m.desired)
				if err != nil {
					r.m.st.LastError = fmt.Sprintf("accepted socket: %v", err)
					r.m.log.Warn("rotator: checking the accepted socket's keys", "peer", r.m.st.Peer, "err", err)
				} else if len(sp.Ops) > 0 {
					r.m.log.Info("rotator: accepted socket corrected", "peer", r.m.st.Peer, "ops", len(sp.Ops))
				}
				r.m.st.Waiting = ""
			}
		}
		if r.Err() == nil {
			c.changed(r.m.st.Peer) // a new socket: its keys are news
		}
	}
	for {
		if r.Err() == nil {
			r.m.own()
			before := r.m.keyView()
			r.m.pre = nil // a read of an earlier Exclusive call is stale now
			r.take(time.Now)
			if now := time.Now(); !r.m.idleUntil(before, r.next, now) {
				r.next = r.m.step(now)
			}
			// Published whether it stepped or not: what the mailbox
			// brought shows (the key count) as a step's result would.
			r.m.handOff()
			if r.m.keyView() != before {
				c.changed(r.m.st.Peer)
			}
		}
		wait := time.Until(r.next)
		r.mu.Lock()
		switch {
		case r.halted:
			r.mu.Unlock()
			r.m.stopProbe() // a wait's keepalive probe ends with the machine
			r.mu.Lock()
			r.running = false
			r.finishLocked()
		case r.woken || wait <= 0:
			r.woken = false
			r.mu.Unlock()
			continue
		default:
			r.running = false
			r.waitLocked(wait)
		}
		r.mu.Unlock()
		return
	}
}
