package rotator

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
)

// PeerID names one BGP peer: its address and VRF (bgp/peer.Key, the one
// identity of a peer in aokeyd), the key of every per-peer map.
type PeerID = peer.Key

// Jitter is the randomness source for the steady re-read (±10%) and the
// retry backoff (±20%). A Controller shares it between its peers' goroutines,
// so it must be safe for concurrent use (a *math/rand/v2.Rand is not, unless
// only one machine uses it).
type Jitter interface {
	Float64() float64
}

// SystemJitter is the default Jitter: math/rand/v2's goroutine-safe
// top-level source, seeded randomly per process. Tests inject their own.
type SystemJitter struct{}

// Float64 is rand.Float64.
func (SystemJitter) Float64() float64 { return rand.Float64() }

// Step names one kernel-writing step of a roll, for the SessionGuard.
type Step string

// Steps of a roll.
const (
	StepInstall  Step = "install"  // add the new key (and in-place replacements)
	StepAnnounce Step = "announce" // set RNext to the new key
	StepSwitch   Step = "switch"   // make the new key Current_key
	StepRetire   Step = "retire"   // delete the old key
	StepRestore  Step = "restore"  // put RNext back after an abort
)

// SessionGuard is consulted around every step (the bgp package implements
// it with the session's state): an error from Before skips the step, an
// error from After (the session dropped) aborts the roll; both back off.
// ctx is the machine's: it ends when the machine is stopped (PeerDown,
// Accepted of a new socket, Close), and a guard asking the speaker gives
// up then.
type SessionGuard interface {
	Before(ctx context.Context, peer PeerID, step Step) error
	After(ctx context.Context, peer PeerID, step Step) error
}

// GuardWaiter is implemented by a SessionGuard that can say what its
// Before and After wait for (for the peer's Status.Waiting while they run).
type GuardWaiter interface {
	WaitingFor(peer PeerID, step Step) string
}

// Config holds the roll timing.
type Config struct {
	// SwitchTimeout is how long to wait for the peer to send with the
	// announced key before giving up (default 2m).
	SwitchTimeout time.Duration
	// Grace is the minimum time between making the new key current and
	// deleting the old one (default 1m).
	Grace time.Duration
	// Poll is how often counters are read while a roll is in progress
	// (default 1s).
	Poll time.Duration
	// Steady is how often a steady peer's socket is re-read to put back
	// keys or Current_key/RNext_key that drifted (default 30s, ±10%
	// jitter so that thousands of peers do not read at once). A new
	// desired state wakes the machine at once, whatever Steady is.
	Steady time.Duration
	// Backoff is the first retry delay after an abort, doubled per attempt
	// up to MaxBackoff (defaults 1m and 30m), with ±20% jitter.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// NoPeerProbe: a roll's waits for the peer's next segment arm no
	// TCP keepalive probe (peerprobe.go) and last until the peer sends
	// one of its own.
	NoPeerProbe bool
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.SwitchTimeout, 2*time.Minute)
	def(&c.Grace, time.Minute)
	def(&c.Poll, time.Second)
	def(&c.Steady, 30*time.Second)
	def(&c.Backoff, time.Minute)
	def(&c.MaxBackoff, 30*time.Minute)
	return c
}

// machine is one peer's roll state machine. It is not safe for concurrent
// use: one goroutine (the peer's runner) owns it and the socket.
type machine struct {
	// machineEnv is what every machine of a controller shares (cfg,
	// guard, rnd, log, events): one pointer, not 96 bytes a machine.
	*machineEnv
	sock tcpao.Socket
	// desired is the machine's desired state (read-only: a new one
	// replaces the pointer, takeDesired). It is the value the peer's slot
	// holds, not a copy of it (168 bytes a peer).
	desired *Desired
	ctx     context.Context // the runner's, for the SessionGuard (Background until it runs)
	// st is the machine's status (st.Peer is its peer). While shared, it
	// is the one a run handed to its readers (handOff): the machine keeps
	// no copy of its own while it waits (512 bytes a peer), and takes one
	// (own) before it writes again.
	st *Status
	// pub, when set, receives st at the end of each run (handOff) and a
	// copy of it before a guard or kernel call that may block (publish):
	// Status readers load it without waiting for the machine.
	pub *atomic.Pointer[Status]
	// attempting is true from an attempt's EventRollStarted until its end.
	attempting bool
	shared     bool // st is published: own copies it before a write

	oldRNext OptID
	// oldCarried is oldRNext's key as read with it: an abort that puts
	// it back as RNext_key counts it carried from that write on.
	oldCarried CarriedKey
	baseGood   uint64
	oldGood    GoodCounts // the retire step's base (RetireProof); nil outside StateGrace
	// ownCur is the Current_key this roll's own writes left on the socket
	// (invalid when they did not change it): Current_key equal to it is no
	// sign that the peer switched.
	ownCur OptID
	// graceSent turns true once the peer is seen sending with the new key
	// after the grace period: its pkt_good rose above graceGood, read at
	// the first retire step (graceBase). Until then a key the peer sent
	// with may still be its Current_key.
	graceGood uint64
	graceBase bool
	graceSent bool
	// writes counts the kernel writes on the socket (guarded steps and
	// Exclusive calls), failed ones too: the key list may have changed.
	writes uint64
	// pre is the socket as read (in full) in the borrow of the last
	// Exclusive call the machine took, for the step that follows it at
	// once; nil when there is none, or the loop moved on without that step.
	pre *Observed
	// carried are the keys the last read found carrying the session but
	// not desired, edits the ReasonEdited holds of the last full plan:
	// Status.Kept (setKept).
	carried, edits []Held
	// settle is what the machine knows of edits in place (settle.go).
	settle settleState
	segs   segmentPace // the peer's segment spacing, for the waits' polls
	probe  *armedProbe // the wait's keepalive probe (peerprobe.go); nil outside a wait
	// known is the desired keys' secrets for the run's full reads
	// (knownKeys): nil outside a run, and from each new desired state on
	// until a read asks for them.
	known *tcpao.Known
}

// machineEnv is what the machines of one controller share.
type machineEnv struct {
	cfg   Config
	guard SessionGuard
	rnd   Jitter
	log   *slog.Logger
	// events, when set, receives the roll's events (Options.Events).
	events func(Event)
}

func newMachine(peer PeerID, sock tcpao.Socket, d Desired, cfg Config, g SessionGuard, rnd Jitter, log *slog.Logger, now time.Time) *machine {
	return startMachine(&machineEnv{cfg: cfg.withDefaults(), guard: g, rnd: rnd, log: log}, peer, sock, &d, now)
}

// startMachine is a machine of env's controller on sock with d as its
// desired state (shared, never written).
func startMachine(env *machineEnv, peer PeerID, sock tcpao.Socket, d *Desired, now time.Time) *machine {
	return &machine{machineEnv: env, sock: sock, desired: d,
		ctx: context.Background(), st: &Status{Peer: peer, State: StateSteady, Since: now}, settle: settleState{since: now}}
}

// publish hands a copy of the machine's status to its readers, for a
// step that goes on writing its own.
func (m *machine) publish() {
	if m.pub != nil {
		s := *m.st
		s.Desired = len(m.desired.Keys)
		m.pub.Store(&s)
	}
}

// handOff publishes the machine's status itself, at the end of a run: it
// is shared from then on, never written again (own).
func (m *machine) handOff() {
	m.known = nil
	if m.pub != nil {
		m.own()
		m.st.Desired = len(m.desired.Keys)
		m.pub.Store(m.st)
		m.shared = true
	}
}

// own makes the machine's status its own again after handOff: a copy to
// write, the published one left as it is for its readers. A run calls it
// before anything it does writes the status.
func (m *machine) own() {
	if m.shared {
		s := *m.st
		m.st, m.shared = &s, false
	}
}

// waiting records (and publishes) what the machine is about to wait for;
// "" clears it (published with the step's result).
func (m *machine) waiting(what string) {
	m.st.Waiting = what
	if what != "" {
		m.publish()
	}
}

func (m *machine) guardWait(step Step) string {
	if w, ok := m.guard.(GuardWaiter); ok {
		if s := w.WaitingFor(m.st.Peer, step); s != "" {
			return s
		}
	}
	return fmt.Sprintf("session guard: %s", step)
}

func (m *machine) enter(s State, now time.Time, action string, at time.Time) {
	if from := m.st.State; from != s {
		m.dropProbe() // a wait's probe ends with its state
		m.log.Debug("rotator: state", "peer", m.st.Peer, "from", from, "to", s, "next", action)
		m.st.State, m.st.Since = s, now
		if s != StateGrace {
			// oldGood is the grace period's base alone: toGrace takes it
			// anew on the way in (enter is the only way into StateGrace),
			// so a machine outside it holds none (480 bytes a peer at
			// four keys, the map's).
			m.oldGood = nil
		}
		m.emit(EventState, now, from, AbortNone)
	}
	m.st.NextAction, m.st.NextAt = action, at
}

// idleUntil reports whether a wake-up before next (the time the last step
// asked for) leaves nothing to do until then: the machine waits for the
// peer's switch, in its grace period, or backs off, and what the wake-up
// brought (before is the machine before it took its mailbox) changed
// neither its state nor the socket. A new desired state that keeps the
// roll's target is planned from when the roll next steps (the grace
// period's end, the next poll, the retry): a step now would only read the
// socket, and a fleet-wide change of desired keys (the old key's accept
// end) woke every rolling peer for a read at once. A desired state with
// another target puts the machine back to steady (takeDesired), and an
// Exclusive call wrote the socket: both step at once.
func (m *machine) idleUntil(before keyView, next, now time.Time) bool {
	switch m.st.State {
	case StateAnnounced, StateGrace, StateBackoff:
	default:
		return false
	}
	return m.keyView() == before && now.Before(next)
}

// takeDesired changes the target; a roll towards another key starts over.
// d is shared with the peer's slot: neither writes it.
func (m *machine) takeDesired(d *Desired, now time.Time) {
	changed := d.WantRNext != m.desired.WantRNext || d.WantCurrent != m.desired.WantCurrent
	m.newDesired(m.desired, d)
	m.desired, m.known = d, nil
	if changed && (m.st.State == StateAnnounced || m.st.State == StateGrace) {
		m.enter(StateSteady, now, "re-plan: desired keys changed", now)
	}
	if changed && m.st.State == StateBackoff {
		m.st.Attempts = 0
		m.enter(StateSteady, now, "re-plan: desired keys changed", now)
	}
}

// steadyAt is when a steady peer's socket is read next: Steady ±10%,
// rounded up to a whole second so that the checks of thousands of peers
// share their timer wake-ups (each wake-up of its own costs more than the
// check) while the jitter still spreads them over seconds.
func (m *machine) steadyAt(now time.Time) time.Time {
	d := m.cfg.Steady
	if m.rnd != nil {
		d = time.Duration(float64(d) * (0.9 + 0.2*m.rnd.Float64()))
	}
	at := now.Add(d)
	if t := at.Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	}
	return at
}

// guarded runs one kernel-writing step between the SessionGuard's Before
// and After. A failure is an *AbortError (its Detail still empty) whose
// Reason says which of the three failed; nil when the step ran and the
// session stayed up.
func (m *machine) guarded(step Step, f func() error) *AbortError {
	return m.guardedSteps(step, func() (Step, error) { return step, f() })
}

// guardedSteps is guarded for writes that may end in a later step than
// the one they start (the install that announces, see install): f returns
// the step its last write made, which a kernel error and the guard's After
// name.
func (m *machine) guardedSteps(step Step, f func() (Step, error)) *AbortError {
	defer m.waiting("")
	if m.guard != nil {
		m.waiting(m.guardWait(step))
		if err := m.guard.Before(m.ctx, m.st.Peer, step); err != nil {
			return &AbortError{Reason: AbortGuardRefused, Step: step, Err: fmt.Errorf("session guard before %s: %w", step, err)}
		}
	}
	m.waiting(fmt.Sprintf("kernel: %s on the socket", step))
	m.writes++
	last, err := f()
	if err != nil {
		return &AbortError{Reason: AbortKernelError, Step: last, Err: fmt.Errorf("%s: %w", last, err)}
	}
	if m.guard != nil {
		m.waiting(m.guardWait(last))
		if err := m.guard.After(m.ctx, m.st.Peer, last); err != nil {
			return &AbortError{Reason: AbortSessionDropped, Step: last, Err: fmt.Errorf("session guard after %s: %w", last, err)}
		}
	}
	return nil
}

// rnextCarried is the carried key of rnext's key in o (zero when rnext is
// not valid or o lacks it).
func rnextCarried(o *Observed, rnext OptID) CarriedKey {
	if !rnext.Valid {
		return CarriedKey{}
	}
	return carriedKeyOf(findRecv(o, rnext.ID))
}

func findRecv(o *Observed, id uint8) *tcpao.KeyInfo {
	for i := range o.Keys {
		if o.Keys[i].RecvID == id {
			return &o.Keys[i]
		}
	}
	return nil
}

func curOf(o *Observed) (cur, rnext OptID) {
	if o.Info.HaveCurrent {
		cur = ID(o.Info.CurrentKey)
	}
	if o.Info.HaveRNext {
		rnext = ID(o.Info.RNextKey)
	}
	return cur, rnext
}

// step advances the machine once and returns when it wants to run again.
func (m *machine) step(now time.Time) time.Time {
	// A roll waiting for the peer's switch, or in its grace period, plans
	// nothing from this read (await compares IDs and counters; retire
	// returns before the grace period ends): it is read without the keys'
	// fingerprints, an HMAC of each secret on every poll of every peer in
	// a fleet-wide roll. Each write of a step reads the socket back in
	// full, and a step that plans reads in full.
	// An edit in place that may be pending is read in full (settle.go).
	bare := !m.settle.pending && (m.st.State == StateAnnounced ||
		m.st.State == StateGrace && (now.Before(m.st.Since.Add(m.cfg.Grace)) || m.awaitingNewKey()))
	var obs Observed
	var err error
	if m.pre != nil {
		// Read in full in the borrow of the Exclusive call just taken.
		obs, m.pre = *m.pre, nil
		m.st.Counters = CountersOf(obs, now)
	} else {
		mode := ReadFull
		if bare {
			mode = ReadBare
		}
		obs, err = m.readStep(now, mode)
	}
	if err != nil {
		m.st.LastError = err.Error()
		return now.Add(m.cfg.Poll)
	}
	m.countRead(&obs, now)
	m.segs.observe(&obs, now)
	m.st.Current, m.st.RNext = curOf(&obs)
	m.st.PktBad = obs.Info.PktBad
	m.keptFrom(&obs)
	switch m.st.State {
	case StateBackoff:
		if now.Before(m.st.NextAt) {
			return m.st.NextAt
		}
	case StateAnnounced:
		return m.await(now, &obs)
	case StateGrace:
		return m.retire(now, &obs)
	}
	return m.steady(now, &obs)
}

func (m *machine) steady(now time.Time, obs *Observed) time.Time {
	d := m.desired
	m.settledOn(obs)
	sp := PlanSocket(*d, *obs)
	m.editsFrom(sp)
	m.noteEdits(sp, false)
	m.st.Deferred = len(sp.Deferred)
	cur, _ := curOf(obs)
	if len(sp.Blocked) > 0 {
		m.st.LastError = fmt.Sprintf("blocked: %s (%s)", sp.Blocked[0].Detail, sp.Blocked[0].Why)
	}
	wantCur := !d.WantCurrent.Valid || cur == d.WantCurrent
	// A current key that is desired and sendable is left alone even if it
	// is not WantCurrent: the peer's RNext chose it (don't fight the peer).
	if sp.Empty() && len(sp.Deferred) == 0 && (wantCur || desiredSendable(d, cur)) {
		m.st.HavePending = false
		m.attempting = false // a new desired state left nothing to roll
		if unsettled(sp) {
			// An edit waits for the peer's choice (settle.go): poll.
			m.enter(StateSteady, now, "wait for the peer's choice of key: an edit in place waits for it", now.Add(m.cfg.Poll))
			return m.st.NextAt
		}
		m.enter(StateSteady, now, "watch", m.steadyAt(now))
		return m.st.NextAt
	}
	m.attemptStarts(now)
	// Install: the plan's leading adds and in-place replacements.
	n := 0
	for n < len(sp.Ops) && (sp.Ops[n].Kind == OpAdd || sp.Ops[n].Kind == OpDel && sp.Ops[n].Why == ReasonReplace) {
		n++
	}
	m.ownCur = OptID{}
	_, m.oldRNext = curOf(obs) // what an abort puts back
	m.oldCarried = rnextCarried(obs, m.oldRNext)
	announced := false
	if n > 0 {
		good := obs.Info.PktGood
		var ae *AbortError
		announced, ae = m.install(now, obs, sp.Ops[:n], cur)
		if announced || setsCurrentOrRNext(sp.Ops[:n]) {
			m.ownWrite(now)
		}
		if ae != nil {
			return m.abort(now, ae)
		}
		m.noteEdits(sp, true)
		peerMoved := peerMovedCurrent(obs, sp.Ops[:n], good)
		if ae := m.checkOwnSwitch(now, cur, obs, peerMoved); ae != nil {
			return m.abort(now, ae)
		}
		if after, _ := curOf(obs); peerMoved && after == d.WantCurrent {
			wantCur = true // the peer's switch: await's proof, had it come a poll later
		}
	}
	if !d.WantRNext.Valid {
		// Nothing to announce: converge directly after the grace period.
		return m.toGrace(now, obs)
	}
	nk := findRecv(obs, d.WantRNext.ID)
	if nk == nil {
		m.st.LastError = fmt.Sprintf("key recv=%d not installed", d.WantRNext.ID)
		return now.Add(m.cfg.Poll)
	}
	m.st.Pending, m.st.HavePending = nk.KeyRef, true
	m.baseGood = nk.PktGood
	_, m.oldRNext = curOf(obs)
	m.oldCarried = rnextCarried(obs, m.oldRNext)
	if announced {
		m.log.Debug("rotator: announced new key with its install", "peer", m.st.Peer, "rnext", d.WantRNext.ID)
	} else if m.oldRNext != d.WantRNext {
		want := d.WantRNext.ID
		m.ownWrite(now)
		if ae := m.guarded(StepAnnounce, func() error {
			err := m.sock.SetInfo(tcpao.InfoChange{RNext: &want})
			if err == nil {
				m.st.Counters = m.st.Counters.carrying(carriedKeyOf(nk))
			}
			return err
		}); ae != nil {
			ae.Detail = "announce failed"
			return m.abort(now, ae)
		}
		m.log.Debug("rotator: announced new key", "peer", m.st.Peer, "rnext", want)
	}
	if wantCur {
		return m.toGrace(now, obs)
	}
	m.st.AnnouncedFrom = m.oldRNext
	m.enter(StateAnnounced, now, fmt.Sprintf("wait for the peer to send with key recv=%d", d.WantRNext.ID), now.Add(m.cfg.Poll))
	m.probeWait(now) // the announce's probe: its answer is the peer's switch
	return m.st.NextAt
}

func (m *machine) await(now time.Time, obs *Observed) time.Time {
	d := m.desired
	nk := findRecv(obs, d.WantRNext.ID)
	if nk == nil {
		m.enter(StateSteady, now, "re-plan: new key vanished", now)
		return now
	}
	cur, _ := curOf(obs)
	if m.peerHoldsNewKey(obs, nk) {
		if cur != d.WantCurrent {
			want := d.WantCurrent.ID
			m.ownWrite(now)
			// The switch's read-back is bare: this step plans nothing from it.
			if ae := m.guarded(StepSwitch, func() error {
				_, err := m.writeRead(now, ReadBare, obs, func(s tcpao.Socket) error { return s.SetInfo(tcpao.InfoChange{Current: &want}) }, nil)
				return err
			}); ae != nil {
				ae.Detail = "switch failed"
				return m.abort(now, ae)
			}
		}
		m.log.Debug("rotator: peer sends with new key; switched", "peer", m.st.Peer, "current", d.WantCurrent.ID)
		return m.toGrace(now, obs)
	}
	if now.Sub(m.st.Since) >= m.cfg.SwitchTimeout {
		return m.abort(now, &AbortError{Reason: AbortSwitchTimeout, Detail: fmt.Sprintf(
			"peer did not send with key recv=%d within %s (its pkt_good stayed at %d); kept current send=%s",
			d.WantRNext.ID, m.cfg.SwitchTimeout, nk.PktGood, cur)})
	}
	return m.waitNext(now, m.st.Since.Add(m.cfg.SwitchTimeout))
}

func findSend(o *Observed, id uint8) *tcpao.KeyInfo {
	for i := range o.Keys {
		if o.Keys[i].SendID == id {
			return &o.Keys[i]
		}
	}
	return nil
}

// abort keeps the session on its old key: RNext goes back to what it was,
// why is recorded and the roll is retried after a jittered backoff.
func (m *machine) abort(now time.Time, why *AbortError) time.Time {
	if m.oldRNext.Valid && m.oldRNext != m.desired.WantRNext {
		old := m.oldRNext.ID
		m.ownWrite(now)
		if ae := m.guarded(StepRestore, func() error {
			err := m.sock.SetInfo(tcpao.InfoChange{RNext: &old})
			if err == nil {
				m.st.Counters = m.st.Counters.carrying(m.oldCarried)
			}
			return err
		}); ae != nil {
			why.Restore = fmt.Errorf("restoring rnext=%d failed: %w", old, ae)
		}
	}
	m.st.Attempts++
	b := m.cfg.Backoff
	for i := 1; i < m.st.Attempts && b < m.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, m.cfg.MaxBackoff)
	if m.rnd != nil {
		b = time.Duration(float64(b) * (0.8 + 0.4*m.rnd.Float64()))
	}
	m.st.LastAbort, m.st.LastAbortReason, m.st.LastAbortErr, m.st.LastAbortAt = why.Error(), why.Reason, why, now
	m.st.HavePending = false
	m.log.Warn("rotator: roll aborted; old key kept", "peer", m.st.Peer, "reason", why.Reason, "error", why, "retry_in", b)
	m.attemptStarts(now) // an attempt that aborts has started
	m.attempting = false
	m.emit(EventRollAborted, now, m.st.State, why.Reason)
	m.enter(StateBackoff, now, "retry the roll", now.Add(b))
	return m.st.NextAt
}

func desiredSendable(d *Desired, cur OptID) bool {
	if !cur.Valid {
		return false
	}
	for i := range d.Keys {
		if d.Keys[i].SendID == cur.ID && !d.Keys[i].AcceptOnly {
			return true
		}
	}
	return false
}
