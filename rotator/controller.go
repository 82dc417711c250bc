package rotator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ErrUnknownPeer is returned for a peer the controller has no desired keys
// for (call SetDesired first).
var ErrUnknownPeer = errors.New("rotator: unknown peer")

// Options configure a Controller. Zero values get defaults: SystemJitter
// (the ±10% steady-read and ±20% backoff jitter are on unless a test
// injects its own source), slog.DiscardHandler, no session guard. The
// controller runs on the system clock: tests run it in a testing/synctest
// bubble, whose clock that then is.
type Options struct {
	Config Config
	Rand   Jitter
	Logger *slog.Logger
	Guard  SessionGuard
	// Changed, when set, is called from the run of a peer's machine after a step
	// that changed what its status shows of the session's keys: the roll
	// state, Current_key, RNext_key, the key rolled to, or the socket's
	// key list (any kernel write); and when a machine starts on a new
	// socket. It must not block (a fleet publisher's Wake).
	Changed func(PeerID)
	// Events, when set, receives every peer's roll events (Event), each
	// peer's in order, from the run of that peer's machine. It must not
	// block.
	Events func(Event)
}

// Controller runs one state machine per peer. A machine steps on a
// goroutine of its own while it has work and holds none while it waits
// (runner); one run at a time writes to the peer's socket, and a slow
// peer holds up no other.
type Controller struct {
	opts Options
	env  *machineEnv    // what its machines share (from opts)
	wake *wakeups       // its waiting machines' wake-ups
	wg   sync.WaitGroup // one per runner, done when it finished (finishLocked)

	mu     sync.Mutex
	peers  map[PeerID]*peerSlot
	closed bool // Close ran: no machine starts
	// restored are the keys each peer's sessions carried before a
	// restart (Restore), until a session of the peer is read or the peer
	// is forgotten (carried.go).
	restored map[PeerID][]CarriedKey
}

// peerSlot is one peer's entry. desired is the peer's desired state: only
// SetDesired, Adopt and an Exclusive call that ran set it, each to a value
// of its own that nothing writes afterwards, and a machine takes it (the
// pointer, through its mailbox) from here and from nowhere else. So the
// slot and the machine share one Desired (nil until the first).
type peerSlot struct {
	desired *Desired
	// on names the socket a machine was adopted on (Adopt's on), until
	// the peer goes down: the controller alone knows whether a machine
	// runs on a session.
	on      any
	run     *runner // nil while the peer is down
	stopped *runner // the last machine stopped (PeerDown), until the next starts
	// carried are the keys the last stopped machine's session carried
	// when last read: the keys the peer last authenticated with, which a
	// listener keeps until the peer's next session has been read.
	carried []CarriedKey
}

// NewController starts a controller; Close stops its goroutines.
func NewController(opts Options) *Controller {
	if opts.Rand == nil {
		opts.Rand = SystemJitter{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Config = opts.Config.withDefaults()
	env := &machineEnv{cfg: opts.Config, guard: opts.Guard, rnd: opts.Rand, log: opts.Logger, events: opts.Events}
	return &Controller{opts: opts, env: env, wake: newWakeups(), peers: map[PeerID]*peerSlot{}}
}

// SetDesired sets the keys peer's session should carry (Kind is forced to
// Established) and wakes its state machine. It never waits for the
// machine: the value goes to the peer's mailbox (the latest one wins),
// which the machine empties between two steps.
//
// It reports whether d differs from the peer's desired state (Same). When
// it does not, nothing changes and nothing is woken: d stays the caller's
// (its secrets the caller's to zero). Otherwise the controller owns d.
func (c *Controller) SetDesired(peer PeerID, d Desired) bool {
	d.Kind = Established
	c.mu.Lock()
	s, known := c.slotLocked(peer)
	if known && s.desired != nil && s.desired.Same(d) {
		c.mu.Unlock()
		return false
	}
	s.desired = &d
	r := s.run
	c.mu.Unlock()
	if r != nil {
		r.post(&d)
	}
	return true
}

// slotLocked returns peer's slot, made when it has none (known false);
// c.mu is held.
func (c *Controller) slotLocked(peer PeerID) (s *peerSlot, known bool) {
	if s = c.peers[peer]; s != nil {
		return s, true
	}
	s = &peerSlot{}
	c.peers[peer] = s
	return s, false
}

// Adopt starts peer's machine on a session's socket with d as its desired
// state, unless a machine was already adopted on the same session: on
// names it (any comparable value that stays the same for one session, as
// the speaker's socket handle does). Two callers that see one new session
// (its event and a reconcile pass) start one machine; the other gets
// started false, and d stays its own. It runs Accepted's check of the
// socket's keys (the del_async race).
func (c *Controller) Adopt(peer PeerID, on any, sock tcpao.Socket, d Desired) (started bool, sp SocketPlan, err error) {
	d.Kind = Established
	c.mu.Lock()
	s, _ := c.slotLocked(peer)
	if s.on != nil && s.on == on {
		c.mu.Unlock()
		return false, SocketPlan{}, nil
	}
	s.on, s.desired = on, &d
	c.mu.Unlock()
	sp, err = c.Accepted(peer, sock)
	return true, sp, err
}

// Runs reports whether a machine was adopted on the session on names and
// the peer has not gone down since.
func (c *Controller) Runs(peer PeerID, on any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.peers[peer]
	return s != nil && s.on != nil && s.on == on
}

// Exclusive runs fn on peer's socket between two steps of its state
// machine, which is held off meanwhile (so it stays the socket's only other
// writer), then gives the machine d as its desired state and wakes it. It
// reports false, without calling fn or changing the desired state, when no
// machine runs for peer, it stops before its next step, or ctx ends first
// (a step that does not return: the caller is not held up by it). Once the
// machine has taken fn, Exclusive waits for fn and the borrow it runs in.
// An emergency revoke uses it: no machine is stopped and restarted, and
// the socket is not re-checked by the caller. fn runs in one borrow of the
// socket's descriptor (a Socket that offers BatchKeys) in which the
// machine then reads the socket back in full (and steps from that read);
// Exclusive returns once that borrow ended.
func (c *Controller) Exclusive(ctx context.Context, peer PeerID, d Desired, fn func(sock tcpao.Socket)) bool {
	d.Kind = Established
	c.mu.Lock()
	s := c.peers[peer]
	if s == nil || s.run == nil {
		c.mu.Unlock()
		return false
	}
	r := s.run
	c.mu.Unlock()
	x := &exclusive{desired: &d, fn: fn, ran: make(chan struct{})}
	r.mu.Lock()
	r.excl = append(r.excl, x)
	r.mu.Unlock()
	r.poke()
	taken := func() bool {
		if x.state.CompareAndSwap(exclQueued, exclWithdrawn) {
			return false // the machine will skip it
		}
		<-x.ran // the machine took it: fn runs (or ran) now
		return true
	}
	select {
	case <-x.ran:
	case <-r.doneChan():
		// The machine stopped; it runs every request it took before that.
		if !taken() {
			return false
		}
	case <-ctx.Done():
		if !taken() {
			return false
		}
	}
	// The peer's desired state for its next machine (Accepted) too, as
	// SetDesired would set it.
	c.mu.Lock()
	if s := c.peers[peer]; s != nil && s.run == r {
		s.desired = x.desired
	}
	c.mu.Unlock()
	return true
}

// Accepted is the hook for every socket accepted for peer (and for an
// outgoing connection once established). It first closes the del_async
// window: a key deleted from the listener with del_async may still have
// been copied to a socket accepted before the RCU grace period ended, so
// the accepted socket's keys are read with TCP_AO_GET_KEYS and whatever
// should no longer be there is removed (and missing keys added) before the
// peer's state machine takes the socket over. The returned plan is what was
// done. A stale key that is the new socket's Current_key is left to the
// roll (the peer chose it in its SYN).
//
// Accepted never waits for the peer's previous machine: it is stopped, and
// when it is in a step that has not returned (a kernel call or a speaker
// query stuck), the new machine waits for that step, so that one machine
// at a time touches the peer's sockets (the previous one may have run on
// this very socket); its status says what it waits for. It then cleans the
// socket and logs what it did, and Accepted returns an empty plan.
func (c *Controller) Accepted(peer PeerID, sock tcpao.Socket) (SocketPlan, error) {
	c.mu.Lock()
	s := c.peers[peer]
	if s == nil {
		c.mu.Unlock()
		return SocketPlan{}, fmt.Errorf("accepted socket for %s: %w", peer, ErrUnknownPeer)
	}
	d := s.desired
	old := s.run
	if old == nil {
		old = s.stopped
	}
	s.run, s.stopped = nil, nil
	c.mu.Unlock()
	var busy *runner // the previous machine, still in a step
	if old != nil {
		if !old.halt() {
			busy = old
		}
	}

	var sp SocketPlan
	var obs Observed
	var err error
	if busy == nil {
		if sp, obs, err = clean(sock, *d); err != nil {
			err = fmt.Errorf("accepted socket for %s: %w", peer, err)
		}
	}
	now := time.Now()
	r := &runner{
		c:       c,
		after:   busy,
		m:       startMachine(c.env, peer, sock, d, now),
		running: true, // its first run, started below: a wake before it only asks it to step again
	}
	if obs.HaveAO {
		// What the check read: the keys the new session carries are known
		// (Carried) before the machine's first step reads the socket.
		r.m.st.Counters = CountersOf(obs, now)
	}
	r.m.pub = &r.status
	r.m.ctx = r
	c.mu.Lock()
	if cur := c.peers[peer]; cur != nil && cur.run == nil && !c.closed {
		cur.run = r
		r.m.desired = cur.desired
		if busy != nil {
			w := "the previous machine's step"
			if prev := busy.status.Load(); prev != nil && prev.Waiting != "" {
				w += " (" + prev.Waiting + ")"
			}
			r.m.st.Waiting = w
		}
		r.m.publish()
	} else {
		c.mu.Unlock()
		return sp, errors.Join(err, fmt.Errorf("accepted socket for %s: superseded", peer))
	}
	c.wg.Add(1) // done by finishLocked; under c.mu, so that Close sees this runner or stops it starting
	c.mu.Unlock()
	r.m.emit(EventState, now, r.m.st.State, AbortNone) // before its first run: events stay in order
	go c.run(r)
	return sp, err
}

// Clean reads sock's keys and applies the adds and deletes (not the
// current/rnext changes, which belong to the roll) of the plan for d. It is
// the del_async check for accepted sockets.
func Clean(sock tcpao.Socket, d Desired) (SocketPlan, error) {
	sp, _, err := clean(sock, d)
	return sp, err
}

// clean is Clean, also returning what it read before its writes (which
// delete only keys that carry nothing).
func clean(sock tcpao.Socket, d Desired) (SocketPlan, Observed, error) {
	obs, err := observeKnown(sock, ReadFull, knownOf(&d))
	if err != nil {
		return SocketPlan{}, obs, err
	}
	sp := PlanSocket(d, obs)
	sp.Ops = slices.DeleteFunc(sp.Ops, func(o Op) bool { return o.Kind == OpSetInfo })
	n, err := Apply(sock, sp.Ops)
	sp.Ops = sp.Ops[:n]
	return sp, obs, err
}

// PeerDown stops peer's state machine and forgets its socket (the desired
// keys are kept for the next Accepted). It does not wait for the machine:
// the returned channel is closed once the machine no longer touches the
// socket (at once when none ran; after its step when one was in a step).
// A caller that then writes to the socket itself waits for it.
func (c *Controller) PeerDown(peer PeerID) <-chan struct{} {
	c.mu.Lock()
	s := c.peers[peer]
	var r *runner
	if s != nil {
		s.on = nil
		r, s.run = s.run, nil
		if r != nil {
			s.stopped = r
			if st := r.status.Load(); st != nil && !st.Counters.At.IsZero() {
				s.carried = carriedOf(st.Counters)
				delete(c.restored, peer) // a session read since the start
			}
		}
	}
	c.mu.Unlock()
	if r == nil {
		return closedChan
	}
	r.halt()
	return r.doneChan()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Forget removes a peer entirely (without waiting for its machine, as
// PeerDown).
func (c *Controller) Forget(peer PeerID) {
	c.PeerDown(peer)
	c.mu.Lock()
	delete(c.peers, peer)
	delete(c.restored, peer)
	c.mu.Unlock()
}

// Status returns every peer's status, sorted by peer. It reads the snapshot
// each machine last published and never waits for a running step.
func (c *Controller) Status() []Status {
	c.mu.Lock()
	out := make([]Status, 0, len(c.peers))
	for id, s := range c.peers {
		if s.run == nil {
			out = append(out, Status{Peer: id, State: StateDown})
			continue
		}
		out = append(out, *s.run.status.Load())
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int { return a.Peer.Compare(b.Peer) })
	return out
}

// Snapshots returns every peer's status as the machine last published it,
// in no order and without copying: for readers of every peer on a hot
// path (a metrics scrape), where Status's sorted copies cost more than the
// reading. The snapshots are shared and immutable; callers must not change
// them.
func (c *Controller) Snapshots() []*Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Status, 0, len(c.peers))
	for id, s := range c.peers {
		if s.run == nil {
			out = append(out, &Status{Peer: id, State: StateDown})
			continue
		}
		out = append(out, s.run.status.Load())
	}
	return out
}

// Config is the controller's roll timing, defaults filled in.
func (c *Controller) Config() Config { return c.opts.Config }

// Close stops all state machines and waits for them.
func (c *Controller) Close() {
	c.mu.Lock()
	c.closed = true
	var rs []*runner // every other runner was halted when it was replaced or stopped
	for _, s := range c.peers {
		if s.run != nil {
			rs = append(rs, s.run)
		}
	}
	c.mu.Unlock()
	for _, r := range rs {
		r.halt()
	}
	c.wg.Wait()
}

func (c *Controller) changed(peer PeerID) {
	if c.opts.Changed != nil {
		c.opts.Changed(peer)
	}
}
