package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Options wire a Daemon. Policy and Keys are required, and either Speaker
// and Discoverer (aokeyd keys the speaker's sockets) or Executor (the
// speaker keys its own), never both.
type Options struct {
	Policy     *policy.Policy
	Keys       *keystore.Cache
	Source     keystore.Source // for Revoke write-back; nil: Keys' source cannot be written
	Speaker    bgp.Speaker
	Discoverer bgp.Discoverer
	// Executor carries each peer's key list to a speaker that keys its
	// own sockets (BIRD): the pass plans the lists, Executor.Run applies
	// them (execpass.go). No session or listener is keyed by aokeyd then.
	Executor Executor
	// Kind is the speaker's kind as the registry describes it
	// (config.SpeakerKind): its Caps say which of aoctl replace, adopt
	// and migrate are carried out. Zero: every one with a Speaker, none
	// with an Executor.
	Kind speakers.Kind
	// ListenPort is the speaker's BGP port (default speakers.Port).
	ListenPort uint16
	// ActiveOpens: the speaker runs under `aokeyd exec`, so its outgoing
	// sessions carry keys (ConnectKeys) and are managed too.
	ActiveOpens bool
	// Rotator tunes roll timing; zero fields get the rotator's defaults,
	// except SwitchTimeout which defaults to the policy's.
	Rotator rotator.Config
	// Refresh is how often the key source is read (default
	// keystore.DefaultRefresh). A read that finds nothing new costs a
	// pass nothing: see Resync.
	Refresh time.Duration
	// Resync is the longest time between two full reconcile passes (30s).
	// A full pass re-reads the listening sockets' keys from the kernel and
	// puts back whatever drifted. Full passes also run when an input
	// changes (key snapshot, revocation, policy, Kick, rotate-now, a policy
	// time boundary: every peer's desired state is recomputed) and after a
	// speaker (re)sync or a failed take-over (listeners and take-overs
	// only); a pass with neither touches neither the policy nor the
	// kernel. A session's own event takes it over without a pass.
	// Established sessions are re-read by their own rotation machines
	// (rotator.Config.Steady).
	Resync time.Duration
	// ListenerPoll is how often the listening sockets on ListenPort are
	// listed, when the Discoverer is also a bgp.ListenerLister (1s;
	// negative: never). A change in them asks for a full pass at once, so
	// a listener the speaker opens is keyed within about a poll, not at
	// the next Resync (lwatch.go).
	ListenerPoll time.Duration
	// StaleAfter is the key source age after which status warns (10m).
	StaleAfter time.Duration
	// Kernel is the running kernel as probed at start: its release and
	// which TCP-AO algorithms it accepts (tcpao.ProbeAlgorithms). Status
	// shows it and warns of every key of an algorithm it refuses; zero:
	// not probed, no check.
	Kernel Kernel
	// RevocationsFile records revocations across restarts ("" keeps them
	// in memory only).
	RevocationsFile string
	// MigrationsFile records the TCP-MD5 to TCP-AO migrations across
	// restarts ("": in memory only).
	MigrationsFile string
	// MigrationBound is how long after the switch time a migration's
	// TCP-AO session may take before it rolls back (0: migrate.DefaultBound).
	MigrationBound time.Duration
	// OwnedKeysFile records which keys aokeyd installed, across restarts
	// (owned.go; "" keeps the record in memory: each start is a first
	// start, where only the desired keys found in place are claimed).
	OwnedKeysFile string
	// CarriedKeysFile records the keys each peer's sessions carry, up or
	// down, across restarts (carried.go; "" keeps them in memory only).
	CarriedKeysFile string
	// EarlyRollsFile records aoctl rotate's requests across restarts
	// (earlyrecord.go; "" keeps them in memory only).
	EarlyRollsFile string
	// OptMemMax reads net.core.optmem_max (tcpao.OptMemMax by default).
	OptMemMax func() (int, error)
	// Expedite (kernel.expedite_rcu: rcu.Expediter.Hold), when set,
	// expedites the kernel's RCU grace periods until the function it
	// returns is called: a revoke holds it while it deletes the key from
	// the sessions (each delete on an established socket waits for a
	// grace period).
	Expedite func() (release func())
	// RaiseOptMem (kernel.raise_optmem: tcpao.RaiseOptMemIn) makes
	// net.core.optmem_max in the network namespace of the speaker process
	// pid at least want bytes, and returns it before and after. Before each
	// listener sync the daemon asks for what the listener's keys need, with
	// headroom (optMemTarget). nil leaves the sysctl alone.
	RaiseOptMem func(pid, want int) (before, after int, err error)
	// Rand jitters the rotation machines' steady re-reads and retry
	// backoffs; nil is rotator.SystemJitter (tests inject their own).
	Rand rotator.Jitter
	// WriteFault, when set, is asked before each step of each write of
	// the daemon's records (revocations, ownership, carried keys, early
	// rolls, migrations) and fails the step with its answer: tests' disk
	// that fails a chosen write (durable.Fault). nil in production.
	WriteFault durable.Fault
	Logger     *slog.Logger
	Metrics    *metrics.Metrics // nil: no metrics
	// Changed, when set, is called when what status shows of a session's
	// keys changes: a key installed or removed, Current_key or RNext_key,
	// the roll's state, a new session socket. It is called from the
	// sessions' goroutines and must not block (the fleet publisher's
	// Wake, which rate-limits what it publishes).
	Changed func()
	// SocketOf gives the TCP-AO surface of one of the speaker's sockets
	// (bgp.AOSocket by default); tests hand in-memory sockets through it.
	SocketOf func(bgp.SocketHandle) tcpao.Socket
}

// Daemon is a running aokeyd controller: the wiring of its parts. New
// builds the core and each part, Run starts the goroutines in order under
// one supervisor, and the control API's entry points (control.go) hand each
// request to the part that owns its state. It keeps no state of its own.
type Daemon struct {
	co    *core        // the shared services, which hold the parts too (core.go)
	rec   *reconciler  // the passes and the listeners (reconciler.go)
	table *peerTable   // the speaker's sessions (peers.go)
	revs  *revocations // the revocation service (revoke.go)
	owns  *ownership   // the ownership ledger, adopt and replace (ownership.go)
	migrs *migrations  // the migration controller (migrate.go)
	stat  *statusView  // status, rolls and the metrics view (statusview.go)
	early *earlyRolls  // aoctl rotate's early rolls (early.go)
	conns *connector   // the keys of the speaker's connects (connect.go)
}

// newCore builds the core and the parts in it, each with its own state;
// the controller and the tracker are New's to add.
func newCore(o Options, rs *revocation.Store, owned *ledger, migr *migrate.Store, carried *carriedRecord) *core {
	co := &core{o: o, log: o.Logger}
	if o.Policy != nil { // New requires it; a test's core may go without
		co.setPolicy(o.Policy)
	}
	co.revs = &revocations{core: co, store: rs}
	co.owns = &ownership{core: co, led: owned}
	co.migrs = &migrations{core: co, store: migr}
	co.stat = &statusView{core: co}
	co.early = &earlyRolls{core: co}
	co.table = &peerTable{core: co, m: map[rotator.PeerID]*peerState{}}
	co.conns = &connector{core: co}
	co.recon = newReconciler(co, carried)
	return co
}

// wire is the Daemon over the core's parts.
func wire(co *core) *Daemon {
	return &Daemon{co: co, rec: co.recon, table: co.table, revs: co.revs, owns: co.owns, migrs: co.migrs,
		stat: co.stat, early: co.early, conns: co.conns}
}

// Kernel is what aokeyd knows of the kernel it runs on (Options.Kernel;
// NewKernel, kernel.go).
type Kernel struct {
	Release    string                    // "Linux 6.12.57"
	Algorithms map[tcpao.Algorithm]error // nil: accepted (tcpao.ProbeAlgorithms)
	// Defects are the known TCP-AO defects of the release.
	Defects []tcpao.Defect
	// Unplaced is why the release could not be checked against the known
	// defects (nil: it was): every mitigation applies then.
	Unplaced error
}

// New builds a Daemon; Run starts it.
func New(o Options) (*Daemon, error) {
	if o.Policy == nil || o.Keys == nil {
		return nil, errors.New("daemon: Policy and Keys are required")
	}
	if o.Executor != nil && (o.Speaker != nil || o.Discoverer != nil) {
		return nil, errors.New("daemon: an Executor's speaker keys its own sockets: no Speaker or Discoverer with it")
	}
	if o.Executor == nil && (o.Speaker == nil || o.Discoverer == nil) {
		return nil, errors.New("daemon: Speaker and Discoverer are required (or an Executor)")
	}
	// The defaults are config's, the one place they are written.
	if o.ListenPort == 0 {
		o.ListenPort = speakers.Port
	}
	if o.Resync == 0 {
		o.Resync = config.DefaultResync
	}
	if o.Refresh == 0 {
		o.Refresh = keystore.DefaultRefresh
	}
	if o.ListenerPoll == 0 {
		o.ListenerPoll = defaultListenerPoll
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = config.DefaultStaleAfter
	}
	if o.OptMemMax == nil {
		o.OptMemMax = tcpao.OptMemMax
	}
	if o.SocketOf == nil {
		o.SocketOf = bgp.AOSocket
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rotator.SwitchTimeout == 0 {
		o.Rotator.SwitchTimeout = o.Policy.Safety().SwitchTimeout
	}
	rs, err := revocation.OpenWith(o.RevocationsFile, revocation.Options{Logger: o.Logger, Fault: o.WriteFault})
	if err != nil {
		return nil, err
	}
	owned, err := openLedger(o.OwnedKeysFile, o.WriteFault, o.Logger, time.Now, nil)
	if err != nil {
		return nil, err
	}
	migr, err := migrate.OpenWith(o.MigrationsFile, o.WriteFault)
	if err != nil {
		return nil, err
	}
	if why := migr.Restored(); why != "" {
		o.Logger.Error("MIGRATIONS RECORD "+why+": using its backup, which every write keeps; check the disk",
			"file", o.MigrationsFile, "backup", o.MigrationsFile+".bak")
	}
	carried, restored, err := openCarried(o.CarriedKeysFile, o.WriteFault, o.Logger)
	if err != nil {
		return nil, err
	}
	earlyRec, earlyAsks, earlyRewrite, err := openEarly(o.EarlyRollsFile, o.WriteFault, o.Policy, o.Logger)
	if err != nil {
		return nil, err
	}
	// Every socket the daemon writes records its adds (owned.go).
	socketOf := o.SocketOf
	o.SocketOf = func(h bgp.SocketHandle) tcpao.Socket { return owned.wrap(h.Ref(), socketOf(h)) }
	co := newCore(o, rs, owned, migr, carried)
	d := wire(co)
	if o.Executor != nil {
		co.recon.exec = newExecState()
	}
	d.early.restore(earlyRec, earlyAsks, earlyRewrite) // before the first pass
	d.rec.holdGate()                                   // the start-up gate holds from the start
	// The key cache holds back what a read loses of the chains in use.
	o.Keys.SetBound(co.boundChain)
	if o.Metrics != nil {
		// Per-peer series are read from the kernel when scraped.
		o.Metrics.OnCollect(d.stat.observeMetrics)
	}
	co.tracker = bgp.NewTracker(o.Speaker, o.Discoverer, d.table, bgp.TrackerOptions{
		ListenPort:  o.ListenPort,
		ActiveOpens: o.ActiveOpens,
		Managed:     co.managed,
		Synced:      d.rec.speakerSynced,
		// A learned address of an interface neighbour recomputes the
		// listeners' keys (linklisten.go).
		LinksChanged: d.rec.askFull,
		Log:          o.Logger,
	})
	if o.Metrics != nil {
		o.Metrics.SessionCacheFrom(co.tracker.CacheStats)
	}
	co.ctrl = rotator.NewController(rotator.Options{
		Config: o.Rotator,
		Rand:   o.Rand,
		Logger: o.Logger,
		// The guard asks the tracker, which answers from the session
		// state it follows on the speaker's event stream and asks the
		// speaker (about that neighbor alone) only when it cannot vouch
		// for it.
		Guard: stepGuard{bgp.NewGuard(co.tracker, o.Logger)},
		// Roll events go to the metrics as they happen (rollEvent).
		Events: d.stat.rollEvent,
		Changed: func(id rotator.PeerID) {
			if o.Changed != nil {
				o.Changed()
			}
			d.early.observeEarly(id)
			d.rec.keysChanged() // the listener's carried keys may go (kept.go)
		},
	})
	co.ctrl.Restore(restored)
	return d, nil
}

// SetPolicy swaps in a new, already validated policy (SIGHUP reload) and
// reconciles at once.
func (d *Daemon) SetPolicy(p *policy.Policy) {
	d.co.setPolicy(p)
	d.rec.askFull()
}

// Run reconciles until ctx ends. It returns leaving every installed key in
// place: stopping aokeyd must not drop a session.
//
// Its goroutines: this one is the reconcile goroutine (the passes, and the
// listener part of each revoke and the keying of each socket held in
// listen(2) between them: the listeners' one writer);
// one follows the speaker (bgp.Tracker, whose events take sessions over),
// or with an Executor runs it (its applications beside the passes), and
// the take-over of each new session it reports runs in one of its own
// (handover.go);
// one reads the key source every Refresh and wakes a pass after each read
// (a read that finds nothing new makes it an idle pass); one, when the
// Discoverer can list listeners, lists them every ListenerPoll and asks
// for a full pass when they change (lwatch.go). The controller's
// per-peer machines stop last.
func (d *Daemon) Run(ctx context.Context) error {
	defer func() { _ = d.owns.close() }() // last: after every writer stopped
	defer d.early.flush()                 // what the last events changed
	defer d.co.ctrl.Close()
	defer d.rec.stopped()
	defer d.co.table.handoversEnded() // the take-overs the tracker started, once it stopped
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		if ex := d.co.o.Executor; ex != nil {
			d.rec.runExecutor(ctx, ex)
			return
		}
		for ctx.Err() == nil {
			if err := d.co.tracker.Run(ctx); err != nil && ctx.Err() == nil {
				d.co.log.Warn("speaker watch ended; retrying", "speaker", d.co.o.Speaker.Name(), "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		}
	}()
	d.co.refresh(ctx)
	go func() {
		defer wg.Done()
		// One ticker, not a new timer each read: a channel timer is put in
		// the runtime's heap each time a goroutine blocks on it, and one
		// earlier than the sleeping poller's deadline costs a netpollBreak
		// (a write and a cross-CPU wake-up); a ticker the loop blocks on
		// again before its next tick stays in the heap. Under TCG that
		// wake-up was most of an idle pass's CPU (docs/performance.md).
		tick := time.NewTicker(d.co.o.Refresh)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			d.co.refresh(ctx)
			d.rec.wake()
		}
	}()
	if ll, ok := d.co.o.Discoverer.(bgp.ListenerLister); ok && d.co.o.ListenerPoll > 0 {
		// The first listing, before the first pass: every listener
		// opened after it is a change the watch sees (lwatch.go).
		d.rec.pollListeners(ll)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.rec.watchListeners(ctx, ll)
		}()
	}
	return d.rec.run(ctx)
}

// RefreshKeys re-reads the key source now and runs a full pass (for tests,
// and for `aoctl rotate` after an operator changed the source).
func (d *Daemon) RefreshKeys(ctx context.Context) error {
	_, err := d.co.o.Keys.Refresh(ctx)
	d.rec.askFull() // asked for: a full pass even if nothing changed
	return err
}

// stepGuard lets the bgp session guard watch the rotator's steps; the
// peer's key is the guard's and the tracker's identity too, so a step's
// check goes machine → bgp.Guard → bgp.Tracker with no lookup here. The
// guard bounds each of its questions to the speaker (one neighbor each);
// the step's context (the peer's machine) cancels them when the machine
// stops.
type stepGuard struct{ g *bgp.Guard }

func (s stepGuard) Before(ctx context.Context, k rotator.PeerID, step rotator.Step) error {
	return s.g.Before(ctx, k, string(step))
}

func (s stepGuard) After(ctx context.Context, k rotator.PeerID, step rotator.Step) error {
	return s.g.After(ctx, k, string(step))
}

// WaitingFor implements rotator.GuardWaiter: what the peer's step waits
// for while the guard asks the speaker.
func (stepGuard) WaitingFor(k rotator.PeerID, _ rotator.Step) string { return bgp.WaitingFor(k) }
