package birdnative

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Options wire a Driver. Keys, Policy, Dir, Control and Bird are required.
type Options struct {
	Keys *keystore.Cache
	// Source, when set, records a revoke in the key source too.
	Source keystore.Source
	Policy *policy.Policy
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
	// Refresh is how often the key source is read, Poll how often a pass
	// runs (schedules, and the peer's switch to a new key, are seen
	// within one).
	Refresh, Poll time.Duration
	// RevocationsFile records revocations across restarts ("": memory):
	// the daemon's one record (revocation.File in the state directory),
	// which every speaker reads, so that switching speaker.type forgets
	// none.
	RevocationsFile string
	Logger          *slog.Logger
	Metrics         *metrics.Metrics
	Now             func() time.Time
}

// Driver keeps BIRD's TCP-AO keys from aokeyd's key source through BIRD's
// own configuration (doc.go). Run's goroutine alone writes the files and
// reconfigures BIRD, through its Executor (the files, BIRD's control
// socket and binary, its sockets in the kernel: the pieces the daemon's
// pass will run BIRD on); the control API reads published views and asks
// the run loop for revokes.
type Driver struct {
	*Executor
	o       Options
	log     *slog.Logger
	kick    chan struct{}
	revokes chan revokeAsk
	// revoked is the revocation record (safe for concurrent use): the run
	// loop adds to it, each pass reads it.
	revoked *revocation.Store

	mu sync.Mutex
	// lastGood is each session's read at the last pass.
	lastGood map[peer.Key]sessionRead
	views    []peerView // published by each pass; never modified
	// early are aoctl rotate's requests: the key each neighbor's file
	// prefers until the schedule reaches it (early.Key).
	early map[peer.Key]early.Key
	// configWarn names the settings a reload could not apply.
	configWarn []string
}

// peerView is what a pass found and did for one neighbor.
type peerView struct {
	ID       peer.Key
	File     string
	Keys     []bird.Key // the file's keys (secrets zeroed: IDs and flags only)
	Kept     []kept
	Session  []tcpao.KeyInfo // BIRD's established socket, from the kernel (nil: none)
	Protocol *bird.Protocol
	Names    map[ids]string // chain/key of each ID, from the key source
	Warnings []string
}

// New checks o and returns a Driver; Run starts it.
func New(o Options) (*Driver, error) {
	if o.Keys == nil || o.Policy == nil || o.Dir == "" || o.Control == "" || o.Bird == "" {
		return nil, errors.New("birdnative: Keys, Policy, Dir, Control and Bird are required")
	}
	if o.Port == 0 {
		o.Port = speakers.Port
	}
	if o.Refresh == 0 {
		o.Refresh = keystore.DefaultRefresh
	}
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PID == nil {
		o.PID = findBird
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir %s: %w", o.Dir, err)
	}
	// Whoever may write the keys directory may plant a key line BIRD
	// loads: refused at start.
	if err := durable.CheckDir(o.Dir); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir: %w", err)
	}
	if err := shareDir(o.Dir, o.ReadGID); err != nil {
		return nil, fmt.Errorf("speaker.bird.keys_dir %s: %w", o.Dir, err)
	}
	rev, err := revocation.Open(o.RevocationsFile, o.Logger)
	if err != nil {
		return nil, err
	}
	ex := NewExecutor(ExecOptions{Dir: o.Dir, Control: o.Control, Bird: o.Bird, ReadGID: o.ReadGID, PID: o.PID, Port: o.Port, Logger: o.Logger, Now: o.Now})
	return &Driver{Executor: ex, o: o, log: o.Logger, lastGood: map[peer.Key]sessionRead{}, kick: make(chan struct{}, 1),
		revokes: make(chan revokeAsk), early: map[peer.Key]early.Key{}, revoked: rev}, nil
}

// findBird finds BIRD's process by its name (speaker.bird.pid_file
// names it when there are several).
func findBird() (int, error) { return sockets.FindProcess("bird", "speaker.bird.pid_file") }

// Kick asks for a pass now.
func (d *Driver) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// SetPolicy swaps in a new, already validated policy (SIGHUP).
func (d *Driver) SetPolicy(p *policy.Policy) {
	d.mu.Lock()
	d.o.Policy = p
	d.mu.Unlock()
	d.Kick()
}

// RefreshKeys reads the key source now and runs a pass (SIGHUP).
func (d *Driver) RefreshKeys(ctx context.Context) error {
	_, err := d.o.Keys.Refresh(ctx)
	d.Kick()
	return err
}

func (d *Driver) policy() *policy.Policy {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.o.Policy
}

// Run reads the key source and runs passes until ctx ends. The files stay
// as they are when it returns (BIRD keeps its keys).
func (d *Driver) Run(ctx context.Context) error {
	refresh := time.NewTicker(d.o.Refresh)
	defer refresh.Stop()
	poll := time.NewTicker(d.o.Poll)
	defer poll.Stop()
	d.refresh(ctx)
	for {
		d.pass(ctx, nil, true)
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
			d.refresh(ctx)
		case <-poll.C:
		case <-d.kick:
		case a := <-d.revokes:
			a.done <- d.revokeNow(ctx, a)
		}
	}
}

func (d *Driver) refresh(ctx context.Context) {
	if _, err := d.o.Keys.Refresh(ctx); err != nil {
		d.log.Warn("key source read failed; last good snapshot stays in force", "err", err)
		return
	}
	if d.o.Metrics != nil {
		d.o.Metrics.KeySourceSynced(d.o.Now())
	}
}

// pass plans every neighbor's file and applies the changes: each new file
// checked with `bird -p`, all written, one `birdc configure`, and on a
// refusal every file put back as it was (BIRD runs on its previous
// configuration, and so do its keys). only, when set, limits the pass to
// those neighbors' files (a revoke's); verify reads each changed
// neighbor's session until it carries the file's keys (a revoke checks
// every socket itself).
func (d *Driver) pass(ctx context.Context, only map[peer.Key]bool, verify bool) []peerView {
	snap := d.o.Keys.Current()
	if snap == nil {
		d.publish(nil, "no good key snapshot yet: BIRD's files are left as they are")
		return nil
	}
	defer snap.Zero()
	now := d.o.Now()
	t0 := time.Now()
	views, changes := d.plan(ctx, snap, now, only, true)
	d.timing = passTiming{plan: time.Since(t0)}
	d.mend(views, now)
	if len(changes) > 0 && !now.Before(d.retryAt) {
		d.apply(ctx, changes, views, verify)
	}
	d.publish(views, "")
	if took := time.Since(t0); took > slowPass {
		// Everything else (a revoke too) waited this long: say where.
		d.log.Warn("BIRD pass slow", "took_ms", took.Milliseconds(), "plan_ms", d.timing.plan.Milliseconds(),
			"configure_ms", d.timing.configure.Milliseconds(), "verify_ms", d.timing.verify.Milliseconds(), "files", len(changes))
	}
	return views
}

// slowPass is a pass long enough to be logged with its breakdown.
const slowPass = 5 * time.Second

// passTiming is where a pass spent its time: planning (the key source,
// BIRD's protocols and sessions, bird -p), BIRD's configure, and the
// check of the sessions after it.
type passTiming struct{ plan, configure, verify time.Duration }

// change is one file to replace.
type change struct {
	path       string
	prev, next []byte // prev nil: no file yet
	view       int    // index into the views
}

// plan computes every neighbor's file; changes are those that differ from
// the files on disk and passed `bird -p`. record: a pass's (the sessions'
// pkt_good are remembered for the next one); a dry run's is not.
func (d *Driver) plan(ctx context.Context, snap *keystore.Snapshot, now time.Time, only map[peer.Key]bool, record bool) ([]peerView, []change) {
	pol := d.policy()
	pid, pidErr := d.o.PID()
	protos := d.readProtocols()
	var views []peerView
	var changes []change
	for _, b := range pol.Bindings() {
		if !b.Neighbor.IsSingleIP() {
			continue // refused at config load (doc.go)
		}
		addr := b.Neighbor.Addr()
		id := peer.KeyOf(addr, b.VRF)
		if only != nil && !only[id] {
			continue
		}
		v := peerView{ID: id, File: filepath.Join(d.o.Dir, FileName(addr, b.VRF)), Names: map[ids]string{}}
		if p, ok := protos[peer.KeyOf(addr, "")]; ok {
			v.Protocol = &p
		}
		pk, err := pol.Desired(snap, addr, b.VRF, now)
		if err != nil {
			v.Warnings = append(v.Warnings, "policy: "+err.Error()+": the file is left as it is")
			views = append(views, v)
			continue
		}
		d.scope(&pk, snap, id)
		if snap.Degraded(pk.SourceChain) {
			v.Warnings = append(v.Warnings, fmt.Sprintf("key chain %s is degraded in the key source: the file is left as it is", pk.SourceChain))
			views = append(views, v)
			continue
		}
		for _, e := range checkKeys(pk.Keys) {
			v.Warnings = append(v.Warnings, e.Error())
		}
		if c := snap.Chains[pk.SourceChain]; c != nil {
			for _, m := range c.Keys {
				v.Names[ids{m.SendID, m.RecvID}] = pk.SourceChain + "/" + m.Name
			}
		}
		in := input{Desired: pk.Keys, Preferred: d.preferred(id, pk, record)}
		for _, name := range slices.Concat(pk.Revoked, pk.Expired) {
			if c := snap.Chains[pk.SourceChain]; c != nil {
				if m, ok := c.Key(name); ok {
					in.Revoked = append(in.Revoked, ids{m.SendID, m.RecvID})
				}
			}
		}
		prev, err := readFile(v.File)
		if err != nil {
			v.Warnings = append(v.Warnings, err.Error())
			views = append(views, v)
			continue
		}
		if in.Written, err = parseFile(prev); err != nil {
			v.Warnings = append(v.Warnings, fmt.Sprintf("%s: %v: rewritten from the key source", v.File, err))
		}
		if pidErr == nil {
			var err error
			v.Session, in.Session, err = d.readSession(pid, id, record)
			if err != nil {
				in.Unread = err
				v.Warnings = append(v.Warnings, fmt.Sprintf("BIRD's session with %s could not be read from the kernel: %v: no key leaves its file until it can be (a roll waits at its retire step)", id, err))
			}
		} else if !errors.Is(pidErr, sockets.ErrNoProcess) { // not running: no session
			in.Unread = fmt.Errorf("BIRD's process not found: %w", pidErr)
			v.Warnings = append(v.Warnings, fmt.Sprintf("BIRD's process not found, so its sessions are not read and no key leaves a file (a roll waits at its retire step): %v", pidErr))
		}
		pl := planPeer(in)
		v.Kept = pl.Kept
		if pl.Err != nil {
			v.Warnings = append(v.Warnings, pl.Err.Error())
			v.Keys = bare(in.Written)
		} else {
			v.Keys = bare(pl.Keys)
			next := render(pl.Keys, pl.Disabled)
			if !bytes.Equal(prev, next) {
				changes = append(changes, change{path: v.File, prev: prev, next: next, view: len(views)})
			}
		}
		zeroKeys(in.Written)
		views = append(views, v)
	}
	ok := checked(ctx, d.o.Bird, changes, func(c change, err error) {
		views[c.view].Warnings = append(views[c.view].Warnings, err.Error())
	})
	return views, ok
}

// checked runs every new file through BIRD's parser, in one run
// (validate), and returns the changes it takes; refused hears of each
// other one (its error's hex masked), whose new bytes are cleared.
func checked(ctx context.Context, birdBin string, changes []change, refused func(change, error)) []change {
	files := make([][]byte, len(changes))
	for i, c := range changes {
		files[i] = c.next
	}
	errs := validate(ctx, birdBin, files)
	ok := changes[:0]
	for i, c := range changes {
		if errs[i] != nil {
			refused(c, errors.New(maskHex(errs[i].Error())))
			clear(c.next)
			continue
		}
		ok = append(ok, c)
	}
	return ok
}

// preferred is the key BIRD sends with: the policy's, or the key aoctl
// rotate named while it is one of the peer's keys and the schedule has not
// reached it (early.Key.In). A pass (record) ends a request that no
// longer applies; a key added later is never preferred for being newest.
// BIRD rolls by itself: there is no abort here to end a request on.
func (d *Driver) preferred(id peer.Key, pk policy.PeerKeys, record bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.early[id]
	if !ok {
		return pk.Preferred
	}
	i, why, _ := k.In(pk)
	if i >= 0 {
		return i
	}
	if record {
		delete(d.early, id)
		d.log.Info("aoctl rotate's early roll ends; the schedule governs", "peer", id, "key", k.Label(), "why", why)
	}
	return pk.Preferred
}

func idSet(ks []bird.Key) []ids {
	out := make([]ids, 0, len(ks))
	for _, k := range ks {
		out = append(out, idsOf(k))
	}
	slices.SortFunc(out, cmpIDs)
	return out
}

func cmpIDs(a, b ids) int {
	if a[0] != b[0] {
		return int(a[0]) - int(b[0])
	}
	return int(a[1]) - int(b[1])
}

func (d *Driver) publish(views []peerView, warn string) {
	d.warn(warn)
	d.mu.Lock()
	defer d.mu.Unlock()
	if views != nil || warn != "" {
		d.views = views
	}
	d.metricsOf(views)
}

// bare is ks's IDs and flags, without secrets.
func bare(ks []bird.Key) []bird.Key {
	out := make([]bird.Key, len(ks))
	for i, k := range ks {
		out[i] = bird.Key{SendID: k.SendID, RecvID: k.RecvID, Algorithm: k.Algorithm, Preferred: k.Preferred, Deprecated: k.Deprecated}
	}
	return out
}

func zeroKeys(ks []bird.Key) {
	for _, k := range ks {
		k.Secret.Zero()
	}
}

func keyIDs(ks []bird.Key) string {
	var s []string
	for _, k := range ks {
		f := fmt.Sprintf("%d/%d", k.SendID, k.RecvID)
		if k.Preferred {
			f += " preferred"
		}
		if k.Deprecated {
			f += " deprecated"
		}
		s = append(s, f)
	}
	return strings.Join(s, ", ")
}

var hexRun = regexp.MustCompile(`[0-9a-fA-F]{16,}`)

// maskHex hides any long hex run in a message from BIRD (a secret's hex
// could only come from a key file).
func maskHex(s string) string { return hexRun.ReplaceAllString(s, "[redacted]") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
