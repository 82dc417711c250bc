package birdnative

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// ExecOptions wire an Executor: Options' BIRD half (the keys directory,
// BIRD's control socket, binary and process).
type ExecOptions struct {
	Dir, Control, Bird string
	ReadGID            int
	PID                func() (int, error)
	Port               uint16
	Logger             *slog.Logger
	Now                func() time.Time
}

// Executor carries key lists to BIRD through its configuration: an
// include file per neighbor (FileName), each new file checked with `bird
// -p`, all written, one `birdc configure`, every file put back when BIRD
// refuses, then BIRD's sessions read back from the kernel (never
// written). It is daemon.Executor for the daemon's pass (Observe, Submit,
// Run, Clean), and the Driver's pass runs on the same pieces (apply,
// sessionKeys, protocols, waitClean). One goroutine applies at a time:
// Run's, or the Driver's run loop (not both: a Driver does not Run its
// Executor).
type Executor struct {
	o    ExecOptions
	log  *slog.Logger
	kick chan struct{}

	// The applying goroutine's own: the last application's timing, the
	// backoff after a configure BIRD did not take, and when mend last
	// enabled each protocol.
	timing  passTiming
	retryAt time.Time
	backoff time.Duration
	mended  map[string]time.Time

	emu sync.Mutex // guards the fields below
	// cfgErr is the last configure's failure ("": none).
	cfgErr string
	// protocols is BIRD's last report of its BGP protocols, by neighbor.
	protocols map[peer.Key]bird.Protocol
	// pending are the plans submitted and not yet applied (the latest
	// per peer).
	pending map[peer.Key]daemon.ExecPlan
}

var _ daemon.Executor = (*Executor)(nil)

// NewExecutor returns an Executor over o's keys directory, which the
// caller has checked (New does: durable.CheckDir, shareDir).
func NewExecutor(o ExecOptions) *Executor {
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
	return &Executor{o: o, log: o.Logger, kick: make(chan struct{}, 1), pending: map[peer.Key]daemon.ExecPlan{}}
}

// Name is the speaker kind's.
func (e *Executor) Name() string { return "bird" }

// configErr is the last configure's failure, or a pass's warning.
func (e *Executor) configErr() string {
	e.emu.Lock()
	defer e.emu.Unlock()
	return e.cfgErr
}

// warn records a pass's warning where no configure failure is shown.
func (e *Executor) warn(w string) {
	e.emu.Lock()
	defer e.emu.Unlock()
	if w != "" && e.cfgErr == "" {
		e.cfgErr = w
	}
}

// readProtocols asks BIRD for its BGP protocols (`show protocols all`)
// and keeps the report for Observe; nil when BIRD does not answer.
func (e *Executor) readProtocols() map[peer.Key]bird.Protocol {
	protos := map[peer.Key]bird.Protocol{}
	out, err := bird.Command(e.o.Control, "show protocols all")
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

// sessionKeys reads BIRD's established socket with the peer from the
// kernel, without fingerprints: its keys, or nil when there is none.
func (e *Executor) sessionKeys(pid int, id peer.Key) ([]tcpao.KeyInfo, bool, error) {
	refs, err := sockets.System{}.Connections(pid, id.Addr)
	if err != nil || len(refs) == 0 {
		return nil, false, err
	}
	var keys []tcpao.KeyInfo
	err = sockets.System{}.With(refs[0], func(fd int) error {
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
// session from the kernel and BIRD's last protocol report (Run's, or the
// Driver's pass's); files and the kernel only.
func (e *Executor) Observe(ctx context.Context, peers []peer.Key) map[peer.Key]daemon.ExecObserved {
	out := make(map[peer.Key]daemon.ExecObserved, len(peers))
	pid, pidErr := e.o.PID()
	e.emu.Lock()
	protos := e.protocols
	e.emu.Unlock()
	for _, id := range peers {
		ob := daemon.ExecObserved{Where: "bird " + e.fileOfPeer(id)}
		if p, ok := protos[peer.KeyOf(id.Addr, "")]; ok {
			ob.Protocol = &p
		}
		b, err := readFile(e.fileOfPeer(id))
		if err != nil {
			ob.Warnings = append(ob.Warnings, err.Error())
		} else if ks, err := parseFile(b); err != nil {
			ob.Warnings = append(ob.Warnings, fmt.Sprintf("%s: %v", e.fileOfPeer(id), err))
		} else {
			ob.Written = writtenAsSocket(ks)
			zeroKeys(ks)
		}
		clear(b)
		switch {
		case pidErr == nil:
			keys, there, err := e.sessionKeys(pid, id)
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
	e.emu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run implements daemon.Executor: it applies the pending plans as they
// come (a refused configure is retried after its backoff, at the next
// Submit) until ctx ends.
func (e *Executor) Run(ctx context.Context, done func(daemon.ExecOutcome)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
		}
		e.emu.Lock()
		plans := e.pending
		e.pending = map[peer.Key]daemon.ExecPlan{}
		e.emu.Unlock()
		if len(plans) == 0 {
			continue
		}
		e.readProtocols()
		out := e.applyPlans(ctx, plans)
		for _, p := range plans {
			p.Zero() // rendered and written: the secrets are the executor's
		}
		done(out)
	}
}

// applyPlans renders each plan's file (the written file with the plan's
// deletes and adds, flagged as BIRD takes it: planPeer's list), checks
// the changed ones with `bird -p` and applies them.
func (e *Executor) applyPlans(ctx context.Context, plans map[peer.Key]daemon.ExecPlan) daemon.ExecOutcome {
	t0 := time.Now()
	out := daemon.ExecOutcome{Failed: map[peer.Key]error{}}
	var views []peerView
	var changes []change
	for id, pl := range plans {
		out.Gen = max(out.Gen, pl.Gen)
		path := e.fileOfPeer(id)
		prev, err := readFile(path)
		if err != nil {
			out.Failed[id] = err
			continue
		}
		written, err := parseFile(prev)
		if err != nil {
			written = nil // rewritten from the plan
		}
		p := listOf(pl, written)
		zeroKeys(written)
		if p.Err != nil {
			out.Failed[id] = p.Err
			continue
		}
		v := peerView{ID: id, File: path, Keys: bare(p.Keys)}
		if next := render(p.Keys, p.Disabled); !slices.Equal(prev, next) {
			changes = append(changes, change{path: path, prev: prev, next: next, view: len(views)})
		}
		views = append(views, v)
	}
	ok := checked(ctx, e.o.Bird, changes, func(c change, err error) { out.Failed[views[c.view].ID] = err })
	// Within a backoff nothing is applied (the next pass submits again),
	// but for a revoke's plan.
	revoke := false
	for _, pl := range plans {
		revoke = revoke || pl.Revoke
	}
	if len(ok) > 0 && (revoke || !e.o.Now().Before(e.retryAt)) {
		out.ConfigureErr = e.apply(ctx, ok, views, true)
	}
	for _, v := range views {
		if len(v.Warnings) > 0 {
			if out.Warnings == nil {
				out.Warnings = map[peer.Key][]string{}
			}
			out.Warnings[v.ID] = v.Warnings
		}
	}
	out.Timing = time.Since(t0)
	return out
}

// listOf is the file plan pl leaves of written (planPeer's keys, from the
// plan the pass made on the file as a socket).
func listOf(pl daemon.ExecPlan, written []bird.Key) plan {
	in := input{Desired: pl.Keys, Preferred: pl.Preferred, Written: written}
	for _, r := range pl.Revoked {
		in.Revoked = append(in.Revoked, idsOfRef(r))
	}
	fs := fileAsSocket(in)
	return fs.keys(in, pl.Plan)
}

// apply writes the changed files and reconfigures BIRD once; it returns
// why BIRD was not reconfigured (nil: it was).
func (e *Executor) apply(ctx context.Context, changes []change, views []peerView, verify bool) error {
	defer func() {
		for _, c := range changes {
			clear(c.next)
		}
	}()
	for _, c := range changes {
		if err := e.writeFile(c.path, c.next); err != nil {
			e.restore(changes)
			return e.failed(fmt.Sprintf("cannot write %s: %v", c.path, err))
		}
	}
	written := time.Now()
	out, err := bird.Command(e.o.Control, "configure")
	e.timing.configure = time.Since(written)
	switch {
	case err != nil:
		// BIRD is not running (or not answering): the files are in place
		// for its start; the next pass configures again.
		return e.failed(fmt.Sprintf("BIRD's control socket %s: %v: the key files are written, BIRD reads them when it starts or at the next configure", e.o.Control, err))
	case !strings.Contains(out, "Reconfigured") && !strings.Contains(out, "Reconfiguration in progress"):
		e.restore(changes)
		return e.failed(fmt.Sprintf("birdc configure failed (%s): BIRD runs its previous configuration and keys; aokeyd's key files are put back as they were and the change is tried again", maskHex(oneLine(out))))
	}
	e.emu.Lock()
	e.cfgErr = ""
	e.emu.Unlock()
	e.backoff, e.retryAt = 0, time.Time{}
	for _, c := range changes {
		e.log.Info("BIRD key file applied", "peer", views[c.view].ID.String(), "file", c.path, "keys", keyIDs(views[c.view].Keys))
	}
	if verify {
		t := time.Now()
		e.verify(changes, views)
		e.timing.verify = time.Since(t)
	}
	return nil
}

// verify reads BIRD's session with each changed neighbor from the kernel
// until it carries exactly the file's keys (5 s at most; BIRD applies a
// configure in the background), and warns in the peer's status when it
// does not. A neighbor without a session is verified at its next one.
func (e *Executor) verify(changes []change, views []peerView) {
	pid, err := e.o.PID()
	if err != nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range changes {
		v := &views[c.view]
		want := idSet(v.Keys)
		for {
			keys, _, _ := e.sessionKeys(pid, v.ID)
			if keys == nil {
				break
			}
			got := make([]ids, 0, len(keys))
			for _, k := range keys {
				got = append(got, ids{k.SendID, k.RecvID})
			}
			slices.SortFunc(got, cmpIDs)
			if slices.Equal(got, want) {
				v.Session = keys
				break
			}
			if time.Now().After(deadline) {
				v.Warnings = append(v.Warnings, fmt.Sprintf("BIRD was reconfigured, but its session with %s carries keys %v, not the file's %v: check `birdc show protocols all` (is %s included by this neighbor's protocol?)", v.ID, got, want, c.path))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *Executor) restore(changes []change) {
	for _, c := range changes {
		var err error
		if c.prev == nil {
			err = os.Remove(c.path)
		} else {
			err = e.writeFile(c.path, c.prev)
		}
		if err != nil {
			e.log.Error("cannot put a BIRD key file back", "file", c.path, "err", err)
		}
	}
}

// failed records a configure that did not take and backs off; it
// returns why.
func (e *Executor) failed(why string) error {
	e.backoff = min(max(2*e.backoff, time.Second), time.Minute)
	e.retryAt = e.o.Now().Add(e.backoff)
	e.emu.Lock()
	first := e.cfgErr != why
	e.cfgErr = why
	e.emu.Unlock()
	if first {
		e.log.Warn("BIRD not reconfigured", "why", why, "retry_in", e.backoff)
	}
	return errors.New(why)
}

// noListeningSocket is BIRD's last error of a BGP protocol it disabled
// because the protocol's listening socket could not be opened.
const noListeningSocket = "No listening socket"

// mendEvery is the least time between two enables of one protocol.
const mendEvery = 10 * time.Second

// mend enables again each protocol of a managed peer that BIRD disabled
// for want of its listening socket. BIRD closes a protocol's listener when
// the protocol restarts (a configure it cannot apply live, birdc restart)
// and binds a new one; while another process holds a duplicate of the old
// one, which aokeyd does for a moment whenever it reads the listener's
// keys (a revoke's check), the old one still listens, the bind fails, and
// BIRD leaves the protocol disabled for good
// (integration.TestBIRDRestartWhileListenerHeld). Only that error is
// mended: a protocol the operator disabled stays so.
func (e *Executor) mend(views []peerView, now time.Time) {
	for _, v := range views {
		p := v.Protocol
		if p == nil || p.State != "down" || !strings.Contains(p.LastError, noListeningSocket) {
			continue
		}
		if at, ok := e.mended[p.Name]; ok && now.Sub(at) < mendEvery {
			continue
		}
		if e.mended == nil {
			e.mended = map[string]time.Time{}
		}
		e.mended[p.Name] = now
		out, err := bird.Command(e.o.Control, "enable "+p.Name)
		if err != nil {
			e.log.Error("BIRD disabled a protocol for want of its listening socket, and enabling it failed", "peer", v.ID, "protocol", p.Name, "err", err)
			continue
		}
		e.log.Warn("BIRD disabled a protocol for want of its listening socket (its re-bind met the old listener still open): enabled again",
			"peer", v.ID, "protocol", p.Name, "bird", strings.TrimSpace(out))
	}
}

// writeFile replaces path with b: 0600 (the file holds secrets), or 0640
// with ReadGID's group when BIRD reads it as its own user.
func (e *Executor) writeFile(path string, b []byte) error {
	if e.o.ReadGID > 0 {
		return durable.WriteGroup(path, b, 0o640, e.o.ReadGID)
	}
	return durable.Write(path, b, 0o600)
}

// waitClean reads BIRD's listeners and its sessions with the covered
// peers until none holds key id for any of them (10 s at most), and
// returns the peers still dirty then.
func (e *Executor) waitClean(ctx context.Context, covered []peer.Key, id ids) (map[peer.Key]bool, error) {
	pid, err := e.o.PID()
	if err != nil {
		return nil, fmt.Errorf("BIRD's process: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirty, err := e.dirty(pid, covered, id)
		if err == nil && len(dirty) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return dirty, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dirty are the covered peers for which a BIRD socket (a listener, or a
// session with the peer) holds id.
func (e *Executor) dirty(pid int, covered []peer.Key, id ids) (map[peer.Key]bool, error) {
	out := map[peer.Key]bool{}
	read := func(r sockets.Ref, peers []peer.Key) error {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			for _, k := range ks {
				if k.SendID != id[0] || k.RecvID != id[1] {
					continue
				}
				for _, p := range peers {
					if k.Peer.Contains(p.Addr) {
						out[p] = true
					}
				}
			}
			return err
		})
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the socket closed meanwhile
		}
		return err
	}
	lis, err := sockets.System{}.Listeners(pid, e.o.Port)
	if err != nil {
		return nil, err
	}
	for _, r := range lis {
		if err := read(r, covered); err != nil {
			return nil, err
		}
	}
	for _, p := range covered {
		conns, err := sockets.System{}.Connections(pid, p.Addr)
		if err != nil {
			return nil, err
		}
		for _, r := range conns {
			if err := read(r, []peer.Key{p}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Clean implements daemon.Executor: BIRD's listeners and its sessions
// with peers, read until none holds ref (10 s at most); the peers still
// dirty then.
func (e *Executor) Clean(ctx context.Context, peers []peer.Key, ref tcpao.KeyRef) (map[peer.Key]bool, error) {
	return e.waitClean(ctx, peers, ids{ref.SendID, ref.RecvID})
}
