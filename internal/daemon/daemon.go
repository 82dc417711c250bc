package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Options wire a Daemon. Speaker, Discoverer, Policy and Keys are required.
type Options struct {
	Policy     *policy.Policy
	Keys       *keystore.Cache
	Source     keystore.Source // for Revoke write-back; nil: Keys' source cannot be written
	Speaker    bgp.Speaker
	Discoverer bgp.Discoverer
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
	// RaiseOptMem (kernel.raise_optmem: tcpao.RaiseOptMemIn) makes
	// net.core.optmem_max in the network namespace of the speaker process
	// pid at least want bytes, and returns it before and after. Before each
	// listener sync the daemon asks for what the listener's keys need, with
	// headroom (optMemTarget). nil leaves the sysctl alone.
	RaiseOptMem func(pid, want int) (before, after int, err error)
	// Rand jitters the rotation machines' steady re-reads and retry
	// backoffs; nil is rotator.SystemJitter (tests inject their own).
	Rand    rotator.Jitter
	Logger  *slog.Logger
	Metrics *metrics.Metrics // nil: no metrics
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

// Daemon is a running aokeyd controller.
type Daemon struct {
	o       Options
	log     *slog.Logger
	ctrl    *rotator.Controller // each peer's desired keys and rotation machine
	tracker *bgp.Tracker        // the speaker's sessions and sockets
	revoked *revocation.Store   // recorded revocations
	pol     atomic.Pointer[policyState]
	peers   peerTable      // what the speaker reported, per peer
	ops     operatorAsks   // rotate-now and replace approvals
	rec     reconciler     // the reconcile goroutine's; it alone writes the listeners
	view    scrapeView     // what the metrics hold
	snaps   snapshots      // the shared read-only key snapshot
	owned   *ledger        // which installed keys are aokeyd's
	carried *carriedRecord // what each peer's sessions carry, durably
	migr    *migrate.Store // TCP-MD5 to TCP-AO migrations (migrate.go)
	rolls   rollJournal    // each peer's last roll steps (rolls.go)
	lwatch  listenerWatch  // the listener watch's state (lwatch.go)
	// configWarn names the settings a reload could not apply.
	configWarn atomic.Pointer[[]string]
}

// peerState is what the speaker reported of one managed peer: its session
// and the socket handle. Its desired keys, and whether a machine runs on
// the session, are the rotation controller's (SetDesired, Runs). Published
// values are never modified: updatePeer replaces them, so readers need no
// lock once they hold one.
type peerState struct {
	id      rotator.PeerID
	info    bgp.PeerInfo
	binding policy.Binding
	handle  bgp.SocketHandle // nil while the session is down
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
	if o.Policy == nil || o.Keys == nil || o.Speaker == nil || o.Discoverer == nil {
		return nil, errors.New("daemon: Policy, Keys, Speaker and Discoverer are required")
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
	rs, err := revocation.Open(o.RevocationsFile, o.Logger)
	if err != nil {
		return nil, err
	}
	owned, err := openLedger(o.OwnedKeysFile, o.Logger, time.Now)
	if err != nil {
		return nil, err
	}
	migr, err := migrate.Open(o.MigrationsFile)
	if err != nil {
		return nil, err
	}
	if why := migr.Restored(); why != "" {
		o.Logger.Error("MIGRATIONS RECORD "+why+": using its backup, which every write keeps; check the disk",
			"file", o.MigrationsFile, "backup", o.MigrationsFile+".bak")
	}
	carried, restored, err := openCarried(o.CarriedKeysFile, o.Logger)
	if err != nil {
		return nil, err
	}
	earlyRec, earlyRolls, earlyRewrite, err := openEarly(o.EarlyRollsFile, o.Policy, o.Logger)
	if err != nil {
		return nil, err
	}
	// Every socket the daemon writes records its adds (owned.go).
	socketOf := o.SocketOf
	o.SocketOf = func(h bgp.SocketHandle) tcpao.Socket { return owned.wrap(h.Ref(), socketOf(h)) }
	d := &Daemon{
		o:       o,
		log:     o.Logger,
		owned:   owned,
		carried: carried,
		migr:    migr,
		revoked: rs,
		peers:   peerTable{m: map[rotator.PeerID]*peerState{}},
		rec:     newReconciler(),
	}
	d.pol.Store(newPolicyState(o.Policy))
	d.ops.early.restore(earlyRec, earlyRolls, earlyRewrite) // before the first pass
	d.rec.gate.Store(&control.StartUpGate{})                // the start-up gate holds from the start
	// The key cache holds back what a read loses of the chains in use.
	o.Keys.SetBound(d.boundChain)
	if o.Metrics != nil {
		// Per-peer series are read from the kernel when scraped.
		o.Metrics.OnCollect(d.observeMetrics)
	}
	d.tracker = bgp.NewTracker(o.Speaker, o.Discoverer, d, bgp.TrackerOptions{
		ListenPort:  o.ListenPort,
		ActiveOpens: o.ActiveOpens,
		Managed:     d.managed,
		Synced: func() {
			d.rec.trackerSynced.Store(true)
			d.resync()
		},
		Log: o.Logger,
	})
	if o.Metrics != nil {
		o.Metrics.SessionCacheFrom(d.tracker.CacheStats)
	}
	d.ctrl = rotator.NewController(rotator.Options{
		Config: o.Rotator,
		Rand:   o.Rand,
		Logger: o.Logger,
		// The guard asks the tracker, which answers from the session
		// state it follows on the speaker's event stream and asks the
		// speaker (about that neighbor alone) only when it cannot vouch
		// for it.
		Guard: stepGuard{bgp.NewGuard(d.tracker, o.Logger)},
		// Roll events go to the metrics as they happen (rollEvent).
		Events: d.rollEvent,
		Changed: func(id rotator.PeerID) {
			if o.Changed != nil {
				o.Changed()
			}
			d.observeEarly(id)
			// A session's keys changed: when the listener keeps keys only
			// because sessions carry them, the keys carried may have
			// changed too (a roll retired the old key), and the next
			// listener sync, not the next resync, lets them go.
			if d.listenerCarries() {
				d.resync()
			}
		},
	})
	d.ctrl.Restore(restored)
	return d, nil
}

func (d *Daemon) policy() *policy.Policy { return d.pol.Load().pol }

// SetPolicy swaps in a new, already validated policy (SIGHUP reload) and
// reconciles at once.
func (d *Daemon) SetPolicy(p *policy.Policy) {
	d.pol.Store(newPolicyState(p))
	d.Kick()
}

// Kick asks for a full reconcile pass now: desired state recomputed and
// the listeners re-read from the kernel.
func (d *Daemon) Kick() {
	d.rec.events.Add(1)
	d.wake()
}

// resync asks for a full pass that synchronises the listeners and takes
// over sessions not yet taken over, without recomputing every peer's
// desired state: a session event changes nothing for the other peers (a
// mass take-over must not cost a fleet-wide recompute per session).
func (d *Daemon) resync() {
	d.rec.sessions.Add(1)
	d.wake()
}

// wake runs a pass now; it is a full one only if an input changed or one
// is due.
func (d *Daemon) wake() {
	select {
	case d.rec.kick <- struct{}{}:
	default:
	}
}

// Passes reports how many reconcile passes have run: idle ones (no input
// changed and no full pass due: nothing computed, nothing read from the
// kernel) and full ones.
func (d *Daemon) Passes() (idle, full uint64) {
	return d.rec.idlePasses.Load(), d.rec.fullPasses.Load()
}

func (d *Daemon) managed(p bgp.PeerInfo) bool {
	_, err := d.policy().BindingFor(p.Neighbor, p.VRF)
	return err == nil
}

// Run reconciles until ctx ends. It returns leaving every installed key in
// place: stopping aokeyd must not drop a session.
//
// Its goroutines: this one is the reconcile goroutine (the passes, and the
// listener part of each revoke and the keying of each socket held in
// listen(2) between them: the listeners' one writer);
// one follows the speaker (bgp.Tracker, whose events take sessions over);
// one reads the key source every Refresh and wakes a pass after each read
// (a read that finds nothing new makes it an idle pass); one, when the
// Discoverer can list listeners, lists them every ListenerPoll and asks
// for a full pass when they change (lwatch.go). The controller's
// per-peer machines stop last.
func (d *Daemon) Run(ctx context.Context) error {
	defer func() { _ = d.owned.close() }() // last: after every writer stopped
	defer d.ops.early.flush()              // what the last events changed
	defer d.ctrl.Close()
	defer close(d.rec.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := d.tracker.Run(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("speaker watch ended; retrying", "speaker", d.o.Speaker.Name(), "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		}
	}()
	d.refresh(ctx)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d.o.Refresh):
			}
			d.refresh(ctx)
			d.wake()
		}
	}()
	if ll, ok := d.o.Discoverer.(bgp.ListenerLister); ok && d.o.ListenerPoll > 0 {
		// The first listing, before the first pass: every listener
		// opened after it is a change the watch sees (lwatch.go).
		d.pollListeners(ll)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.watchListeners(ctx, ll)
		}()
	}
	defer d.dropListenerWant()
	defer d.dropShared()
	defer d.dropAsks() // first: no ask is left waiting once Run returns
	for {
		next := d.reconcile(ctx)
		var timer <-chan time.Time // nil: no pass due until woken
		if !next.IsZero() {
			timer = time.After(max(time.Until(next), 100*time.Millisecond))
		}
		for served := true; served; {
			select {
			case <-ctx.Done():
				d.log.Info("stopping; installed keys stay in place")
				return nil
			case r := <-d.rec.revokes:
				d.revokeListeners(r)
				close(r.done)
				continue // the pass the revoke kicks comes after it
			case a := <-d.rec.listens:
				d.serveListen(ctx, a)
				continue
			case <-d.rec.kick:
			case <-timer:
			}
			served = false
		}
	}
}

// refresh reads the key source once.
func (d *Daemon) refresh(ctx context.Context) {
	changed, err := d.o.Keys.Refresh(ctx)
	switch {
	case err != nil:
		d.log.Warn("key source read failed; last good snapshot stays in force", "source", d.o.Keys.Status().Source, "err", err)
		if d.o.Metrics != nil {
			d.o.Metrics.KeySourceFailed()
		}
	default:
		if d.o.Metrics != nil {
			d.o.Metrics.KeySourceSynced(time.Now())
		}
		if changed {
			d.log.Info("key source changed", "source", d.o.Keys.Status().Source)
		}
	}
}

// RefreshKeys re-reads the key source now and runs a full pass (for tests,
// and for `aoctl rotate` after an operator changed the source).
func (d *Daemon) RefreshKeys(ctx context.Context) error {
	_, err := d.o.Keys.Refresh(ctx)
	d.Kick() // asked for: a full pass even if nothing changed
	return err
}

// snapshot returns a clone of the last good snapshot with the recorded
// revocations applied, or nil when there is none yet. The caller zeroes it.
func (d *Daemon) snapshot() *keystore.Snapshot {
	s := d.o.Keys.Current()
	if s == nil {
		return nil
	}
	d.revoked.Apply(s)
	return s
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

// peer returns the peer's current state. A *peerState is never modified
// once published (updatePeer replaces it), so the caller may read it
// without holding d.peers.mu.
func (d *Daemon) peer(id rotator.PeerID) *peerState {
	d.peers.mu.Lock()
	defer d.peers.mu.Unlock()
	return d.peers.m[id]
}

// peerList returns every peer's current state (read-only, see peer).
func (d *Daemon) peerList() []*peerState {
	d.peers.mu.Lock()
	defer d.peers.mu.Unlock()
	out := make([]*peerState, 0, len(d.peers.m))
	for _, p := range d.peers.m {
		out = append(out, p)
	}
	return out
}

// updatePeer replaces the peer's state by a modified copy (creating it when
// missing) and returns the new one.
func (d *Daemon) updatePeer(id rotator.PeerID, fn func(p *peerState)) *peerState {
	d.peers.mu.Lock()
	defer d.peers.mu.Unlock()
	var n peerState
	if old := d.peers.m[id]; old != nil {
		n = *old
	}
	n.id = id
	fn(&n)
	d.peers.m[id] = &n
	return &n
}

// OnEstablished implements bgp.SessionObserver: a managed peer's session is
// up on an accepted connection. Its keys are checked against the desired
// set at once (the del_async race) and its rotation machine starts.
func (d *Daemon) OnEstablished(ctx context.Context, info bgp.PeerInfo, h bgp.SocketHandle) {
	id := info.Key()
	b, err := d.policy().BindingFor(info.Neighbor, info.VRF)
	if err != nil {
		return
	}
	if info.MD5 {
		// The kernel refuses TCP-AO next to TCP-MD5 on one socket: the
		// session is left alone (no handle, so no pass touches it).
		d.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = info, b, nil })
		d.log.Error("refusing to manage the session: "+md5Fix(info.Neighbor), "peer", id)
		return
	}
	snap, release := d.shared()
	defer release()
	if snap != nil && d.md5Session(snap, info, h) {
		// A TCP-MD5 peer's session: an established TCP-MD5 connection
		// never takes a TCP-AO key (EISCONN), so no pass touches it.
		d.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = info, b, nil })
		d.log.Info("session established on TCP-MD5: not managed", "peer", id, "socket", h.Ref().String())
		return
	}
	d.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = info, b, h })
	d.log.Info("session established", "peer", id, "socket", h.Ref().String())
	if snap == nil {
		// reconcile takes the session over after the first good read.
		d.log.Warn("no key snapshot yet: not touching the new session until the first good read", "peer", id)
		d.resync()
		return
	}
	if !d.takeOver(snap, id) {
		d.resync() // the next pass retries
	}
	if r, ok := d.migrationOf(info.Neighbor, info.VRF); ok && (r.Step == migrate.Prepared || r.Step == migrate.Switching) {
		d.wake() // the pass sees whether the new session is the migration's TCP-AO one
	}
}

// takeOver checks a session's keys against the desired set and starts its
// rotation machine, unless one already runs for this socket. It reports
// whether a machine runs on the session's socket now.
func (d *Daemon) takeOver(snap *keystore.Snapshot, id rotator.PeerID) bool {
	p := d.peer(id)
	if p == nil || p.handle == nil {
		return false
	}
	if d.ctrl.Runs(id, p.handle) {
		return true
	}
	if r, ended := d.ops.early.session(id, sessionOf(p.handle), time.Now()); ended {
		d.log.Info("aoctl rotate's early roll ends: the session it rolled went down before the roll completed; the schedule governs "+
			"(aoctl rotate asks again)", "peer", id, "key", r.label())
	}
	if d.md5Session(snap, p.info, p.handle) {
		d.updatePeer(id, func(p *peerState) { p.handle = nil }) // as OnEstablished leaves it
		return true
	}
	desired, _, err := d.desiredFor(snap, p, time.Now())
	if err != nil {
		d.log.Warn("no desired keys for peer", "peer", id, "err", err)
		return false
	}
	// The session event and a reconcile pass may both get here for the
	// same new session: the controller starts one machine.
	started, sp, err := d.ctrl.Adopt(id, p.handle, d.o.SocketOf(p.handle), desired)
	if !started {
		zeroDesired(desired)
		return true // taken over by the other caller
	}
	if err != nil {
		d.log.Warn("checking the accepted socket's keys", "peer", id, "err", err)
	}
	if len(sp.Ops) > 0 {
		d.log.Info("accepted socket corrected", "peer", id, "ops", len(sp.Ops))
	}
	d.log.Info("rotation machine started", "peer", id)
	return true
}

// OnDown implements bgp.SessionObserver.
func (d *Daemon) OnDown(ctx context.Context, info bgp.PeerInfo) {
	id := info.Key()
	d.ctrl.PeerDown(id)
	d.noteRollDown(info)
	if r, ended := d.ops.early.down(id, time.Now()); ended {
		d.log.Info("aoctl rotate's early roll ends with the session; the schedule governs (aoctl rotate asks again)", "peer", id, "key", r.label())
		d.wake() // the pass writes the record
	}
	d.noteDown(ctx, info)
	d.peers.mu.Lock()
	if old := d.peers.m[id]; old != nil {
		n := *old
		n.handle, n.info = nil, info
		d.peers.m[id] = &n
	}
	d.peers.mu.Unlock()
	d.log.Info("session down; its socket is no longer touched", "peer", id)
}

// md5Fix says why a neighbor with a TCP-MD5 password cannot carry TCP-AO
// keys and how to fix it, in each speaker's words.
func md5Fix(n netip.Addr) string {
	return fmt.Sprintf("neighbor %s has a TCP-MD5 password and a TCP-AO binding: the kernel refuses TCP-AO next to TCP-MD5 on one socket (EKEYREJECTED); "+
		"remove the password from the speaker (FRR: `no neighbor %s password`; gobgpd: the neighbor's auth-password) or the neighbor from aokeyd's policy", n, n)
}
