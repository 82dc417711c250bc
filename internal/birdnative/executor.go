package birdnative

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ExecOptions wire an Executor. Dir, Control and Bird are required.
type ExecOptions struct {
	// Dir holds the include files, one per neighbor (FileName).
	Dir string
	// Control is BIRD's control socket (birdc's -s).
	Control string
	// Bird is the bird binary, for `bird -p`.
	Bird string
	// ReadGID is the group that reads the include files: the group BIRD
	// runs as (Debian: -g bird), since BIRD reads its configuration and
	// its includes after dropping privileges. 0: none, the files are the
	// owner's alone (0600, the directory 0700). Otherwise every file is
	// written 0640 with this group and the directory is 0750 with it, on
	// every write, so a rewrite never takes BIRD's access away.
	ReadGID int
	// PID finds BIRD's process, whose sockets are read (never written).
	PID func() (int, error)
	// Port is BIRD's BGP port (default speakers.Port).
	Port uint16
	// Poll is how often Run reads BIRD's protocols (status, and a
	// protocol BIRD disabled for want of its listener: mend); default 1 s.
	Poll   time.Duration
	Logger *slog.Logger
	Now    func() time.Time
	// OnCommand, when set, is called once for every command the executor
	// sends BIRD's control socket, with its kind (CommandConfigure,
	// CommandShow, CommandEnable), whatever BIRD answers: the daemon counts
	// them as a metric (aokeyd_speaker_rpcs_total{method}), so that the
	// configures a roll or a revoke costs can be read. It must not block.
	OnCommand func(kind string)
	// Expedite (kernel.expedite_rcu), when set, expedites the kernel's
	// RCU grace periods until the function it returns is called: held
	// for each configure, in which BIRD deletes each dropped key from
	// its session, one after another in its one thread, each delete
	// waiting for a grace period (1,000 sessions: over 12 s in the
	// guest, past birdc's answer and the peers' hold timers).
	Expedite func() (release func())
}

// The kinds of BIRD command OnCommand names.
const (
	CommandConfigure = "birdc configure"
	CommandShow      = "birdc show protocols"
	CommandEnable    = "birdc enable"
)

// Executor carries key lists to BIRD through its configuration: an
// include file per neighbor (FileName), each new file checked with `bird
// -p`, all written, one `birdc configure`, every file put back when BIRD
// refuses, then BIRD's sessions read back from the kernel (never
// written). It is daemon.Executor: the daemon's pass plans each
// neighbor's list (the rotator's planner and retire proof: the
// never-strand rule) and submits it; Run alone writes the files and
// reconfigures BIRD, beside the pass, and its waits (bird -p, the
// configure, the read-back) never block the pass.
type Executor struct {
	o    ExecOptions
	log  *slog.Logger
	kick chan struct{}

	// Run's own: the last application's timing, the backoff after a
	// configure BIRD did not take and why it failed (logged once), and
	// when mend last enabled each protocol.
	timing   passTiming
	retryAt  time.Time
	backoff  time.Duration
	lastFail string
	mended   map[string]time.Time
	// configures counts the `birdc configure` calls Run made, taken or
	// not (logged with each: "BIRD reconfigured").
	configures int
	// shapes are the key files' shapes BIRD's parser took.
	shapes shapeChecker
	// files are the include files' keys as read, by the files' identity
	// (Observe's; safe for concurrent use).
	files writtenCache
	// applying is set while Run applies plans: the poll reads nothing
	// then (BIRD is busy with the configure, and its report would be of
	// protocols mid-reconfigure).
	applying atomic.Bool

	emu sync.Mutex // guards the fields below
	// protocols is BIRD's last report of its BGP protocols, by neighbor.
	protocols map[peer.Key]bird.Protocol
	// pending are the plans submitted and not yet applied (the latest
	// per peer).
	pending map[peer.Key]daemon.ExecPlan
	// managed are the peers the pass last observed: those whose protocol
	// Run mends.
	managed map[peer.Key]bool
	// hotUntil: Run reads BIRD's protocols every poll until then
	// (idlePolls, hotFor).
	hotUntil time.Time
}

// warm has Run read BIRD's protocols every poll for hotFor from now.
func (e *Executor) warm() {
	e.emu.Lock()
	e.hotUntil = e.o.Now().Add(hotFor)
	e.emu.Unlock()
}

var _ daemon.Executor = (*Executor)(nil)

// Open checks o and the keys directory (made when missing; its owner and
// mode: whoever may write it may plant a key line BIRD loads; shared with
// ReadGID) and returns an Executor over it.
func Open(o ExecOptions) (*Executor, error) {
	if o.Dir == "" || o.Control == "" || o.Bird == "" {
		return nil, errors.New("birdnative: Dir, Control and Bird are required")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir %s: %w", o.Dir, err)
	}
	if err := durable.CheckDir(o.Dir); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir: %w", err)
	}
	if err := shareDir(o.Dir, o.ReadGID); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir %s: %w", o.Dir, err)
	}
	return newExecutor(o), nil
}

// findBird finds BIRD's process by its name (speaker.bird.pid_file
// names it when there are several).
func findBird() (int, error) { return sockets.FindProcess("bird", "speaker.bird.pid_file") }

// newExecutor is an Executor over o's keys directory, which the caller
// has checked (Open).
func newExecutor(o ExecOptions) *Executor {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PID == nil {
		o.PID = findBird
	}
	if o.Port == 0 {
		o.Port = speakers.Port
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return &Executor{o: o, log: o.Logger, kick: make(chan struct{}, 1), pending: map[peer.Key]daemon.ExecPlan{}}
}

// Name is the speaker kind's.
func (e *Executor) Name() string { return "bird" }

// readProtocols asks BIRD for its BGP protocols (`show protocols all`)
// and keeps the report for Observe; nil when BIRD does not answer.
func (e *Executor) readProtocols() map[peer.Key]bird.Protocol {
	protos := map[peer.Key]bird.Protocol{}
	out, err := e.command(CommandShow, "show protocols all")
	if err != nil {
		return protos
	}
	for _, p := range bird.ParseProtocols(out) {
		if p.Proto == "BGP" && p.Neighbor.IsValid() {
			protos[peer.KeyOf(p.Neighbor, "")] = p
		}
	}
	e.emu.Lock()
	e.protocols = protos
	e.emu.Unlock()
	return protos
}

// command sends BIRD's control socket one command, counted (OnCommand).
func (e *Executor) command(kind, cmd string) (string, error) {
	out, err := bird.Command(e.o.Control, cmd)
	if e.o.OnCommand != nil {
		e.o.OnCommand(kind)
	}
	return out, err
}

// sessionsOf finds BIRD's established sockets with every peer of ids in one
// sock_diag dump and one search of BIRD's descriptors (sockets.
// ConnectionsTo), by the peer's unmapped address: reading them peer by
// peer cost a dump and a search each, O(N^2) a pass (a route server's
// thousand protocols took over a CPU a second).
func sessionsOf(pid int, ids []peer.Key) (map[netip.Addr][]sockets.Ref, error) {
	want := make(map[netip.Addr]bool, len(ids))
	for _, id := range ids {
		want[id.Addr.Unmap()] = true
	}
	return sockets.System{}.ConnectionsTo(pid, want)
}

// keysOf reads the keys of the first of refs, a session's socket, from the
// kernel, without fingerprints (nil, false: no socket).
func keysOf(refs []sockets.Ref) ([]tcpao.KeyInfo, bool, error) {
	if len(refs) == 0 {
		return nil, false, nil
	}
	var keys []tcpao.KeyInfo
	err := sockets.System{}.With(refs[0], func(fd int) error {
		var err error
		keys, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
		return err
	})
	return keys, err == nil, err
}

// fileOfPeer is the include file of peer id.
func (e *Executor) fileOfPeer(id peer.Key) string {
	return filepath.Join(e.o.Dir, FileName(id.Addr, id.VRF))
}

// writtenAsSocket is a written file as a socket's keys: its preferred
// key Current_key and RNext_key, each key's material by its fingerprint.
func writtenAsSocket(ks []bird.Key) rotator.Observed {
	o := rotator.Observed{HaveAO: len(ks) > 0}
	for _, k := range ks {
		o.Keys = append(o.Keys, tcpao.KeyInfo{KeyRef: refOf(idsOf(k)), Algorithm: k.Algorithm, Fingerprint: k.Secret.Fingerprint(),
			IsCurrent: k.Preferred, IsRNext: k.Preferred})
	}
	return o
}

// Observe implements daemon.Executor: each peer's file as a socket, its
// session from the kernel and BIRD's last protocol report (Run's poll);
// files and the kernel only.
func (e *Executor) Observe(ctx context.Context, peers []peer.Key) map[peer.Key]daemon.ExecObserved {
	out := make(map[peer.Key]daemon.ExecObserved, len(peers))
	pid, pidErr := e.o.PID()
	var conns map[netip.Addr][]sockets.Ref
	var connsErr error
	if pidErr == nil {
		conns, connsErr = sessionsOf(pid, peers)
	}
	e.emu.Lock()
	protos := e.protocols
	if slices.ContainsFunc(peers, func(id peer.Key) bool { return !e.managed[id] }) {
		managed := maps.Clone(e.managed) // replaced, never written in place: Run reads it unlocked
		if managed == nil {
			managed = map[peer.Key]bool{}
		}
		for _, id := range peers {
			managed[id] = true
		}
		e.managed = managed
	}
	e.emu.Unlock()
	for _, id := range peers {
		if ctx.Err() != nil {
			break // the caller discards a cancelled read (a revoke began)
		}
		ob := daemon.ExecObserved{Where: "bird " + e.fileOfPeer(id)}
		if p, ok := protos[peer.KeyOf(id.Addr, "")]; ok {
			ob.Protocol = &p
		}
		if w, err := e.files.written(e.fileOfPeer(id)); err != nil {
			ob.Warnings = append(ob.Warnings, err.Error())
		} else {
			ob.Written = w
		}
		switch {
		case pidErr == nil && connsErr != nil:
			ob.Unread = connsErr
		case pidErr == nil:
			keys, there, err := keysOf(conns[id.Addr.Unmap()])
			switch {
			case err != nil:
				ob.Unread = err
			case there:
				ob.Session = &rotator.Observed{HaveAO: true, Keys: keys}
			}
		case !errors.Is(pidErr, sockets.ErrNoProcess):
			ob.Unread = fmt.Errorf("BIRD's process not found: %w", pidErr)
		}
		out[id] = ob
	}
	return out
}

// Submit implements daemon.Executor: each plan replaces its peer's
// pending one, and Run is woken.
func (e *Executor) Submit(plans []daemon.ExecPlan) {
	e.emu.Lock()
	for _, p := range plans {
		if old, ok := e.pending[p.Peer]; ok {
			old.Zero() // the plans' secrets are the executor's
		}
		e.pending[p.Peer] = p
	}
	e.hotUntil = e.o.Now().Add(hotFor)
	e.emu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// idlePolls and hotFor pace Run's reads of BIRD's protocols: every poll
// for hotFor after a plan was submitted or applied or a revoke's check
// ran (BIRD restarts protocols at a configure, and a listener held by
// aokeyd's own reads is what mend repairs), every idlePolls polls
// otherwise (status's session state and a mend then lag by up to that).
// A route server's thousand protocols, read every second, cost BIRD a
// third of a CPU and aokeyd the parse (issue 52 item 2).
const (
	idlePolls = 10
	hotFor    = 30 * time.Second
)

// Run implements daemon.Executor: it applies the pending plans as they
// come, and reads BIRD's protocols (for Observe; every Poll while hot,
// every idlePolls polls otherwise) and mends a managed peer's protocol
// BIRD disabled for want of its listener, in a goroutine of its own (a
// revoke's application never waits behind a poll's read of a route
// server's thousand protocols), until ctx ends. After a configure BIRD
// did not take, plans wait out the backoff pending (a later plan of a
// peer replaces its pending one), but a revoke's, which is applied at
// once with them. The files stay as they are when it returns (BIRD keeps
// its keys).
func (e *Executor) Run(ctx context.Context, done func(daemon.ExecOutcome)) error {
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		e.poll(ctx)
	}()
	defer func() { <-polled }()
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
		case <-retry.C:
		}
		e.emu.Lock()
		plans := e.pending
		revoke := false
		for _, p := range plans {
			revoke = revoke || p.Revoke
		}
		wait := e.retryAt.Sub(e.o.Now())
		if wait > 0 && !revoke {
			e.emu.Unlock()
			retry.Reset(wait) // the plans stay pending
			continue
		}
		e.pending = map[peer.Key]daemon.ExecPlan{}
		e.emu.Unlock()
		if len(plans) == 0 {
			continue
		}
		if !revoke {
			// Fresh for the status the outcome's pass shows. A revoke's
			// application does not wait for BIRD's report of every
			// protocol (a route server's thousand: hundreds of ms); the
			// polls after it read it (warm).
			e.readProtocols()
		}
		e.applying.Store(true)
		out := e.applyPlans(ctx, plans)
		e.applying.Store(false)
		for _, p := range plans {
			p.Zero() // rendered and written: the secrets are the executor's
		}
		e.warm()
		done(out)
	}
}

// poll reads BIRD's protocols every Poll while hot, every idlePolls
// polls otherwise, and mends what a read shows, until ctx ends. It reads
// nothing while plans are applied or a revoke's wait to be: a route
// server's thousand protocols cost BIRD and aokeyd a third of a second
// a read in the guest, CPU the configure and the revoke's read-back need.
func (e *Executor) poll(ctx context.Context) {
	tick := time.NewTicker(e.o.Poll)
	defer tick.Stop()
	var lastRead time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := e.o.Now()
		e.emu.Lock()
		hot := now.Before(e.hotUntil)
		e.emu.Unlock()
		if !hot && !lastRead.IsZero() && now.Sub(lastRead) < idlePolls*e.o.Poll || e.applying.Load() || e.revokePending() {
			continue
		}
		lastRead = now
		protos := e.readProtocols()
		e.emu.Lock()
		managed := e.managed
		e.emu.Unlock()
		e.mend(protos, managed, e.o.Now())
	}
}
