package birdnative

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/tcpao"
)

// applied is one peer's list as an application renders it: its file, its
// keys (IDs and flags, secrets zeroed) and what the read-back found.
type applied struct {
	ID       peer.Key
	File     string
	List     daemon.ExecList
	Warnings []string
}

// change is one file to replace.
type change struct {
	path       string
	prev, next []byte // prev nil: no file yet
	view       int    // index into the applied lists
}

// passTiming is where an application spent its time: rendering and
// checking the files (bird -p), BIRD's configure, and the check of the
// sessions after it.
type passTiming struct{ plan, check, write, configure, verify time.Duration }

// slowApply is an application long enough to be logged with its
// breakdown.
const slowApply = 5 * time.Second

// applyPlans renders each plan's file (the written file with the plan's
// list: daemon.ExecPlan.List), checks the changed ones with `bird -p` in
// one run and applies them with one configure.
func (e *Executor) applyPlans(ctx context.Context, plans map[peer.Key]daemon.ExecPlan) daemon.ExecOutcome {
	t0 := time.Now()
	out := daemon.ExecOutcome{Failed: map[peer.Key]error{}}
	var views []applied
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
			written = nil // rewritten from the plan (Observe reported none)
		}
		keys, list, err := listOf(pl, written)
		if err != nil {
			zeroKeys(written)
			out.Failed[id] = err
			continue
		}
		next := render(keys, list.Disabled)
		zeroKeys(written) // after render: a kept key's secret is the written one's
		v := applied{ID: id, File: path, List: list}
		if !bytes.Equal(prev, next) {
			changes = append(changes, change{path: path, prev: prev, next: next, view: len(views)})
		} else {
			clear(next)
		}
		views = append(views, v)
	}
	t1 := time.Now()
	ok := e.shapes.checked(ctx, e.o.Bird, changes, func(c change, err error) { out.Failed[views[c.view].ID] = err })
	e.timing = passTiming{plan: time.Since(t0), check: time.Since(t1)}
	// A revoke's application is not verified here: the revoke reads every
	// socket itself (Clean), and waits for nothing else.
	revoke := false
	for _, pl := range plans {
		revoke = revoke || pl.Revoke
	}
	if len(ok) > 0 {
		out.ConfigureErr = e.apply(ctx, ok, views, !revoke)
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
	if revoke {
		e.log.Info("BIRD lists applied for a revoke", "files", len(ok), "plan_and_check_ms", e.timing.plan.Milliseconds(),
			"check_ms", e.timing.check.Milliseconds(), "write_ms", e.timing.write.Milliseconds(), "configure_ms", e.timing.configure.Milliseconds())
	}
	if out.Timing > slowApply {
		e.log.Warn("BIRD application slow", "took_ms", out.Timing.Milliseconds(), "plan_and_check_ms", e.timing.plan.Milliseconds(),
			"configure_ms", e.timing.configure.Milliseconds(), "verify_ms", e.timing.verify.Milliseconds(), "files", len(ok))
	}
	return out
}

// listOf is the file pl leaves of written (daemon.ExecPlan.List, every
// executor's rule), as BIRD's keys: an added key with the plan's
// material, every other with its written one. The secrets are borrowed
// from pl and written: the caller renders the keys before it zeroes
// either. list is the list's IDs and flags (Disabled: every key was
// revoked, none is left).
func listOf(pl daemon.ExecPlan, written []bird.Key) (keys []bird.Key, list daemon.ExecList, err error) {
	ws := make([]tcpao.KeyInfo, 0, len(written))
	for _, w := range written {
		ws = append(ws, tcpao.KeyInfo{KeyRef: refOf(idsOf(w)), Algorithm: w.Algorithm, IsCurrent: w.Preferred, IsRNext: w.Preferred})
	}
	l, err := pl.List(ws)
	if err != nil || l.Disabled {
		return nil, l, err
	}
	for _, k := range l.Keys {
		id := idsOfRef(k.Ref)
		bk := bird.Key{SendID: id[0], RecvID: id[1], Preferred: k.Preferred, Deprecated: k.Deprecated}
		if k.Added {
			m := pl.Keys[k.Desired].MKT
			bk.Algorithm, bk.Secret = m.Algorithm, m.Secret
		} else {
			i := slices.IndexFunc(written, func(w bird.Key) bool { return idsOf(w) == id })
			bk.Algorithm, bk.Secret = written[i].Algorithm, written[i].Secret
		}
		keys = append(keys, bk)
	}
	return keys, l, nil
}

// checked runs the new files through BIRD's parser, one of each shape
// BIRD has not taken yet, in one run (shapeChecker.validate), and returns
// the changes it takes; refused hears of each other one (its error's hex
// masked), whose new bytes are cleared.
func (s *shapeChecker) checked(ctx context.Context, birdBin string, changes []change, refused func(change, error)) []change {
	files := make([][]byte, len(changes))
	for i, c := range changes {
		files[i] = c.next
	}
	errs := s.validate(ctx, birdBin, files)
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

// apply writes the changed files and reconfigures BIRD once; it returns
// why BIRD was not reconfigured (nil: it was).
func (e *Executor) apply(ctx context.Context, changes []change, views []applied, verify bool) error {
	defer func() {
		for _, c := range changes {
			clear(c.next)
		}
	}()
	t := time.Now()
	if err := e.writeFiles(changes); err != nil {
		e.restore(changes)
		return e.failed(err.Error())
	}
	written := time.Now()
	e.timing.write = written.Sub(t)
	release := func() {}
	if e.o.Expedite != nil {
		release = e.o.Expedite()
	}
	out, err := e.command(CommandConfigure, "configure")
	release()
	e.timing.configure = time.Since(written)
	e.configures++
	switch {
	case err != nil:
		// BIRD is not running (or not answering): the files are in place
		// for its start; the next pass configures again.
		return e.failed(fmt.Sprintf("BIRD's control socket %s: %v: the key files are written, BIRD reads them when it starts or at the next configure", e.o.Control, err))
	case !strings.Contains(out, "Reconfigured") && !strings.Contains(out, "Reconfiguration in progress"):
		e.restore(changes)
		return e.failed(fmt.Sprintf("birdc configure failed (%s): BIRD runs its previous configuration and keys; aokeyd's key files are put back as they were and the change is tried again", maskHex(oneLine(out))))
	}
	e.lastFail = ""
	e.backoff, e.retryAt = 0, time.Time{}
	for _, c := range changes {
		e.log.Info("BIRD key file applied", "peer", views[c.view].ID.String(), "file", c.path, "keys", views[c.view].List.String())
	}
	// One line per configure, with the count since the start: a roll's or
	// a revoke's configures are the count's rise over it.
	e.log.Info("BIRD reconfigured", "files", len(changes), "configure_ms", e.timing.configure.Milliseconds(), "configures", e.configures)
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
func (e *Executor) verify(changes []change, views []applied) {
	pid, err := e.o.PID()
	if err != nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	left := changes
	for len(left) > 0 {
		if e.revokePending() {
			// A revoke waits behind this application; it reads every
			// socket itself (Clean), so the read-back gives way.
			return
		}
		peers := make([]peer.Key, 0, len(left))
		for _, c := range left {
			peers = append(peers, views[c.view].ID)
		}
		// One dump for every session still to verify (sessionsOf).
		conns, err := sessionsOf(pid, peers)
		if err != nil {
			return
		}
		var still []change
		for _, c := range left {
			v := &views[c.view]
			keys, _, _ := keysOf(conns[v.ID.Addr.Unmap()])
			if keys == nil {
				continue // no session: verified at its next one
			}
			got := make([]ids, 0, len(keys))
			for _, k := range keys {
				got = append(got, ids{k.SendID, k.RecvID})
			}
			slices.SortFunc(got, cmpIDs)
			want := idSet(v.List)
			if slices.Equal(got, want) {
				continue
			}
			if time.Now().After(deadline) {
				v.Warnings = append(v.Warnings, fmt.Sprintf("BIRD was reconfigured, but its session with %s carries keys %v, not the file's %v: check `birdc show protocols all` (is %s included by this neighbor's protocol?)", v.ID, got, want, c.path))
				continue
			}
			still = append(still, c)
		}
		left = still
		if len(left) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// revokePending reports whether a revoke's plan waits to be applied.
func (e *Executor) revokePending() bool {
	e.emu.Lock()
	defer e.emu.Unlock()
	for _, p := range e.pending {
		if p.Revoke {
			return true
		}
	}
	return false
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
	first := e.lastFail != why
	e.lastFail = why
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
// mended: a protocol the operator disabled stays so. Run's, at each poll.
func (e *Executor) mend(protos map[peer.Key]bird.Protocol, managed map[peer.Key]bool, now time.Time) {
	for id := range managed {
		p, ok := protos[peer.KeyOf(id.Addr, "")]
		if !ok || p.State != "down" || !strings.Contains(p.LastError, noListeningSocket) {
			continue
		}
		if at, ok := e.mended[p.Name]; ok && now.Sub(at) < mendEvery {
			continue
		}
		if e.mended == nil {
			e.mended = map[string]time.Time{}
		}
		e.mended[p.Name] = now
		out, err := e.command(CommandEnable, "enable "+p.Name)
		if err != nil {
			e.log.Error("BIRD disabled a protocol for want of its listening socket, and enabling it failed", "peer", id, "protocol", p.Name, "err", err)
			continue
		}
		e.log.Warn("BIRD disabled a protocol for want of its listening socket (its re-bind met the old listener still open): enabled again",
			"peer", id, "protocol", p.Name, "bird", strings.TrimSpace(out))
	}
}

// writeFile replaces path with b: 0600 (the file holds secrets), or 0640
// with ReadGID's group when BIRD reads it as its own user.
// writeFiles writes every change's new file in one batch (durable.
// WriteBatch: the fsyncs shared); it returns the first file's error.
func (e *Executor) writeFiles(changes []change) error {
	files := make([]durable.File, len(changes))
	for i, c := range changes {
		files[i] = durable.File{Path: c.path, Data: c.next}
	}
	gid, perm := -1, os.FileMode(0o600)
	if e.o.ReadGID > 0 {
		gid, perm = e.o.ReadGID, 0o640
	}
	for i, err := range durable.WriteBatch(files, perm, gid) {
		if err != nil {
			return fmt.Errorf("cannot write %s: %v", changes[i].path, err)
		}
	}
	return nil
}

func (e *Executor) writeFile(path string, b []byte) error {
	if e.o.ReadGID > 0 {
		return durable.WriteGroup(path, b, 0o640, e.o.ReadGID)
	}
	return durable.Write(path, b, 0o600)
}
