package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// The early-roll record (issue 47): aoctl rotate's requests (early.go),
// so that a restart, an upgrade or a lost file does not roll a peer back
// to the schedule's key behind the operator's back. Invariants:
//   - It lives in the shared record layer (durable.Record): a regular file
//     only, opened without blocking and capped, kept with a backup
//     (PATH.bak) that restores a lost or unreadable primary; a directory
//     others may write refuses the start, as for every record. Its format
//     is early.Encode's: the peer as peer.Key's text, the target's IDs and
//     material as a fingerprint (never the secret).
//   - A request is in the record before any pass can act on it (ask
//     writes, then applies). Every other change (a roll completed: held; a
//     request ended) is written by the next pass (flush) and at the stop:
//     after a crash the record may hold a request whose end was not
//     written yet, which ends again at the first pass (the key source or
//     the schedule left it behind) or at the take-over (its session is
//     another).
//   - A record that cannot be read does not refuse the start, as a lost
//     revocation would: without it the schedule governs every peer, the
//     safe side. Its copies are set aside (PATH.corrupt, PATH.bak.corrupt)
//     and the log and status say the requests are lost, until an aoctl
//     rotate is recorded. A record whose fingerprints were computed under
//     another fingerprint key cannot tell its targets' material: its
//     requests are dropped the same way, and the next pass rewrites it.
//   - A request whose peer left the policy is dropped at start.
//   - The first pass writes the record even when it holds no request, so
//     that one found missing at a later start (with its backup: else the
//     backup restores it) was lost, and the log says so; the requests it
//     held cannot be told, and the schedule governs.
type earlyRecord struct {
	rec durable.Record
	log *slog.Logger
	// wmu orders the writes: each holds it across its write and the
	// change to earlyRolls.saved (or, for ask, to the requests) after it.
	wmu     sync.Mutex
	saved   []byte // what the files hold (nil: neither exists); wmu
	failing string // the last write's error ("": it succeeded); wmu
	// lostWarn and writeWarn are status's warnings ("" or nil: none).
	lostWarn, writeWarn atomic.Pointer[string]
}

// maxEarlyBytes caps the record: a request is about 500 bytes, so room
// for over 30,000 peers' requests.
const maxEarlyBytes = 16 << 20

func earlyFileRecord(path string, fault durable.Fault) durable.Record {
	return durable.Record{Path: path, Max: maxEarlyBytes, Fault: fault, Check: func(b []byte) error {
		_, _, err := early.Decode(b)
		return err
	}}
}

// openEarly reads the record at path ("": none, memory only) at start:
// the requests it holds for peers in pol, and whether the record must be
// rewritten (requests dropped). Only a state directory others may write
// is an error; an unreadable record is set aside and warned of.
func openEarly(path string, fault durable.Fault, pol *policy.Policy, log *slog.Logger) (r *earlyRecord, rolls map[rotator.PeerID]earlyRoll, rewrite bool, err error) {
	if path == "" {
		return nil, nil, false, nil
	}
	if err := durable.CheckDir(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("early-roll record: %w", err)
	}
	r = &earlyRecord{rec: earlyFileRecord(path, fault), log: log}
	l, err := r.rec.Load()
	if err != nil {
		r.lost(fmt.Sprintf("cannot be read (%v)", err), r.setAside())
		return r, nil, false, nil
	}
	switch l.From {
	case durable.None:
		// Written at the first pass, empty: a record missing at a later
		// start was lost with its backup.
		log.Warn("no early-roll record (a first start, or it was lost with its backup): no aoctl rotate request is restored, "+
			"the schedule governs every peer", "file", path)
		return r, nil, true, nil
	case durable.Backup:
		why := "is missing"
		if l.SetAside != "" {
			why = "is unreadable (" + l.PrimaryErr.Error() + "; kept as " + l.SetAside + ")"
		}
		log.Error("EARLY-ROLL RECORD "+why+": using its backup, which every write keeps; check the disk",
			"file", path, "backup", r.rec.BackupPath())
	}
	if l.BackupWriteErr != nil {
		log.Warn("the early-roll record's backup cannot be rewritten: the record is good; check the disk", "file", path, "err", l.BackupWriteErr)
	}
	r.saved = l.Data
	reqs, check, err := early.Decode(l.Data) // Load checked it
	if err != nil || check != checkValue() {
		r.lost("was written under another fingerprint key (fingerprint.key was lost or replaced), so its keys' material cannot be told", "")
		return r, nil, true, nil
	}
	rolls = make(map[rotator.PeerID]earlyRoll, len(reqs))
	for _, q := range reqs {
		if _, err := pol.BindingForKey(q.Peer); err != nil {
			log.Info("aoctl rotate's early roll ends: the peer left the policy", "peer", q.Peer, "key", q.Key.Label())
			rewrite = true
			continue
		}
		st := earlyRolling
		if q.Held {
			st = earlyHeld
		}
		rolls[q.Peer] = earlyRoll{key: q.Key, asked: q.Asked, state: st, session: q.Session, restored: true}
	}
	if len(rolls) > 0 {
		log.Info("aoctl rotate's early rolls restored from the record", "file", path, "peers", len(rolls))
	}
	return r, rolls, rewrite, nil
}

// setAside moves both copies of an unreadable record aside, so that the
// next write starts afresh and the next start does not warn again; it
// says where they went, or what failed.
func (r *earlyRecord) setAside() string {
	var out []string
	for _, p := range []string{r.rec.Path, r.rec.BackupPath()} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.Rename(p, p+".corrupt"); err != nil {
			out = append(out, fmt.Sprintf("%s could not be set aside: %v", p, err))
			continue
		}
		out = append(out, "kept as "+p+".corrupt")
	}
	return strings.Join(out, "; ")
}

// lost says, in the log and in status, that the requests the record held
// are lost: the schedule governs every peer.
func (r *earlyRecord) lost(why, aside string) {
	r.log.Error("EARLY-ROLL RECORD "+why+": aoctl rotate's early rolls are lost and the schedule governs every peer; "+
		"run aoctl rotate PEER again where a peer is to roll ahead of the schedule; check the disk",
		"file", r.rec.Path, "set_aside", aside)
	w := fmt.Sprintf("the early-roll record %s %s: aoctl rotate's requests it held are lost and the schedule governs every peer "+
		"(aoctl rotate PEER asks again)", r.rec.Path, why)
	if aside != "" {
		w += "; " + aside
	}
	r.lostWarn.Store(&w)
}

// asked notes that an operator's request was recorded: the lost ones
// were seen to. wmu.
func (r *earlyRecord) asked() { r.lostWarn.Store(nil) }

// write records rolls, unless the files hold them already. wmu.
func (r *earlyRecord) write(rolls map[rotator.PeerID]earlyRoll) error {
	reqs := make([]early.Request, 0, len(rolls))
	for id, x := range rolls {
		reqs = append(reqs, early.Request{Peer: id, Key: x.key, Asked: x.asked, Held: x.state == earlyHeld, Session: x.session})
	}
	b, err := early.Encode(reqs, checkValue())
	if err == nil && !bytes.Equal(b, r.saved) {
		var recorded bool
		recorded, err = r.rec.Commit(r.saved, b)
		if recorded {
			r.saved = b
			if err != nil { // the primary holds b; its backup is behind
				r.log.Warn("the early-roll record is written, but its backup is behind; check the disk", "err", err)
				err = nil
			}
		}
	}
	switch {
	case err != nil && err.Error() != r.failing:
		r.failing = err.Error()
		r.log.Error("the early-roll record cannot be written: aoctl rotate is refused, and a roll held or a request ended since its last write "+
			"is not recorded; check the disk", "file", r.rec.Path, "err", err)
		w := fmt.Sprintf("the early-roll record %s cannot be written (%v): aoctl rotate is refused until it can, "+
			"and what changed since its last write is not recorded", r.rec.Path, err)
		r.writeWarn.Store(&w)
	case err == nil && r.failing != "":
		r.failing = ""
		r.log.Info("the early-roll record is written again", "file", r.rec.Path)
		r.writeWarn.Store(nil)
	}
	return err
}

// restore makes rolls, read from rec at start, the requests in force;
// rewrite: the record holds more than they, and the next flush writes.
func (e *earlyRolls) restore(rec *earlyRecord, rolls map[rotator.PeerID]earlyRoll, rewrite bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec, e.rolls = rec, rolls
	if rewrite {
		e.changes++
	}
}

// flush writes the requests to the record when they changed since its
// last write (a roll held, a request ended). The passes call it, and the
// stop; a write that fails is tried again at the next.
func (e *earlyRolls) flush() {
	if e.rec == nil {
		return
	}
	e.mu.Lock()
	pending := e.saved != e.changes
	e.mu.Unlock()
	if !pending {
		return
	}
	e.rec.wmu.Lock()
	defer e.rec.wmu.Unlock()
	e.mu.Lock()
	n, rolls := e.changes, maps.Clone(e.rolls)
	e.mu.Unlock()
	if e.rec.write(rolls) != nil {
		return
	}
	e.mu.Lock()
	e.saved = n
	e.mu.Unlock()
}

// pending reports whether the requests changed since the record's last
// write: a flush would write.
func (e *earlyRolls) pending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec != nil && e.saved != e.changes
}

// warnings are status's warnings about the record.
func (e *earlyRolls) warnings() []string {
	if e.rec == nil {
		return nil
	}
	var out []string
	for _, w := range []*string{e.rec.lostWarn.Load(), e.rec.writeWarn.Load()} {
		if w != nil {
			out = append(out, *w)
		}
	}
	return out
}
