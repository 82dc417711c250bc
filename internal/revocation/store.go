package revocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// Store persists revocations (names only, never key material) so that a
// restarted aokeyd, whichever its speaker, does not re-install a revoked
// key even when the key source could not be told, or has not caught up.
// It is safe for concurrent use.
//
// The record is a JSON list at path, the truth; path.bak is a copy that
// exists to restore a record found unreadable at start. Each revoke has
// one outcome, the same now and after a restart: it is recorded and in
// force, or neither. Add writes the record, then the backup, each
// durably (durable.Write), and is done when both are. If the record write
// fails, nothing changed. If a write fails after the record was
// replaced (its backup's, or its own directory fsync), the record is put
// back to its previous content, and the backup too if it was replaced:
// nothing changed. Only if the record cannot be put back does it hold the
// revocation: then it is in force, and Add says what failed (the backup
// is behind until the next revoke or start rewrites it). At start a
// readable record wins over its backup, which is rewritten to match.
type Store struct {
	path string
	log  *slog.Logger
	// max caps a read or a write of the record (0: MaxRecordBytes; a
	// test lowers it on its own Store).
	max   int64
	fault durable.Fault
	mu    sync.Mutex
	list  []Revocation
	peer  map[peer.Key][]Revocation // the peer-scoped ones, by peer
	// degraded: the last write left the backup behind the record (or the
	// record not durable); nil once a write or a start has put it right.
	degraded error
}

// recordHelp says what an operator can do about an unreadable record.
const recordHelp = "aokeyd will not start without it, so that no revoked key is re-installed: " +
	"restore it, as a regular file, from a backup; or, only if you know which keys are revoked, " +
	`write them as a JSON list ([{"chain":"CHAIN","key":"KEY","at":"2026-01-02T15:04:05Z"}], or [] for none) and start again`

// MaxRecordBytes caps what a read of the record takes. A record holds
// names only, about 100 bytes a revocation, so this is over 100,000
// revocations: a larger file is not one aokeyd wrote, and reading it
// whole could exhaust memory (a symlink to /dev/zero once did).
const MaxRecordBytes = 16 << 20

// maxBytes is the cap of the record's size.
func (s *Store) maxBytes() int64 {
	if s.max > 0 {
		return s.max
	}
	return MaxRecordBytes
}

// record is the revocations record in the shared record layer.
func (s *Store) record() durable.Record {
	return durable.Record{Path: s.path, Max: s.maxBytes(), Fault: s.fault, Check: func(b []byte) error {
		_, err := parseRecord(b)
		return err
	}}
}

// Options are Open's.
type Options struct {
	Logger *slog.Logger // nil: discard
	// Fault, when set, is asked before each step of each write of the
	// record (tests: durable.Fault).
	Fault durable.Fault
}

// Open reads the record at path ("": revocations are kept in memory
// only), restoring it from its backup when it is unreadable, and merges
// into it, once, what an older BIRD driver recorded beside it
// (BirdFile). A record that cannot be read is an error naming it and what
// to do. log may be nil.
func Open(path string, log *slog.Logger) (*Store, error) {
	return OpenWith(path, Options{Logger: log})
}

// OpenWith is Open with o.
func OpenWith(path string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{path: path, log: log, fault: o.Fault}
	if path == "" {
		s.index()
		return s, nil
	}
	l, err := s.record().Load()
	if err != nil {
		return nil, fmt.Errorf("revocations record %w. %s", err, recordHelp)
	}
	switch l.From {
	case durable.None:
		// No revocation ever recorded.
	case durable.Primary:
		s.list, _ = parseRecord(l.Data) // Load checked it
		var bak []Revocation
		bakErr := l.BackupErr
		if bakErr == nil {
			bak, _ = parseRecord(l.Backup)
		}
		s.matchBackup(l, bak, bakErr)
	case durable.Backup:
		why := "is missing"
		if l.SetAside != "" {
			why = "is unreadable (" + l.PrimaryErr.Error() + "; kept as " + l.SetAside + ")"
		}
		s.list, _ = parseRecord(l.Data)
		log.Error("REVOCATIONS RECORD "+why+": using its backup, which holds every revocation that was reported done "+
			"(a revoke's backup write is part of it); check the disk, and to clear revocations on purpose remove both files while aokeyd is stopped",
			"file", path, "backup", path+".bak", "revocations", len(s.list))
	}
	s.index()
	if err := s.mergeBird(); err != nil {
		return nil, err
	}
	return s, nil
}

// matchBackup reports how the backup differed from the record (s.list)
// at start, which Load rewrote from it: missing, unreadable, behind (a
// revoke whose backup write failed and whose record could not be put
// back, or a crash between the two writes) or ahead (a revoke reported as
// failed whose backup could not be put back, or one an older aokeyd,
// which wrote the backup first, was writing when it crashed). The record
// wins: what the backup holds beyond it was never reported done, and is
// not in force. A failure to rewrite it is logged and shown in status;
// the record is good, so the start goes on.
func (s *Store) matchBackup(l durable.Loaded, bak []Revocation, bakErr error) {
	if !l.BackupWritten {
		return
	}
	args := []any{"file", s.path, "backup", s.path + ".bak"}
	switch {
	case errors.Is(bakErr, fs.ErrNotExist):
		s.log.Info("the revocations record has no backup: writing it", args...)
	case bakErr != nil:
		s.log.Warn("the revocations backup is unreadable: rewriting it from the record", append(args, "err", bakErr)...)
	default:
		if extra := missingFrom(s.list, bak); len(extra) > 0 {
			s.log.Warn("the revocations backup holds revocations its record lacks, which were never reported done "+
				"(a revoke that failed, or was cut short by a crash): the record is the truth, they are not in force",
				append(args, "not_in_force", fmt.Sprint(extra))...)
		}
		if behind := missingFrom(bak, s.list); len(behind) > 0 {
			s.log.Warn("the revocations backup lacks revocations its record holds (a revoke whose backup write failed, "+
				"or was cut short by a crash): rewriting it", append(args, "missing", fmt.Sprint(behind))...)
		}
	}
	if err := l.BackupWriteErr; err != nil {
		s.degraded = fmt.Errorf("revocations backup %s.bak cannot be rewritten from its record: %w", s.path, err)
		s.log.Error("REVOCATIONS BACKUP cannot be written: starting with the record, which is good; "+
			"check the disk (until the backup is written, a record that became unreadable could not be restored from it)",
			append(args, "err", err)...)
	}
}

// missingFrom is what of list b lacks.
func missingFrom(b, list []Revocation) []Revocation {
	var out []Revocation
	for _, r := range list {
		if !slices.ContainsFunc(b, r.Same) {
			out = append(out, r)
		}
	}
	return out
}

// ErrBadRecord is in the error of content that is no revocations record.
var ErrBadRecord = errors.New("not a revocations record")

// parseRecord is the revocations of a record file's content.
func parseRecord(b []byte) ([]Revocation, error) {
	var ws []wire
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if ws == nil { // `null`: no list, not an empty one
		return nil, fmt.Errorf("%w: null, not a list", ErrBadRecord)
	}
	list := make([]Revocation, 0, len(ws))
	for i, w := range ws {
		r, err := revocationOf(w)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrBadRecord, i+1, err)
		}
		list = append(list, r)
	}
	return list, nil
}

// encodeRecord is list as a record file: a JSON list, [] when empty,
// never null (which reads as corrupt).
func encodeRecord(list []Revocation) []byte {
	if list == nil {
		list = []Revocation{}
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil { // a Revocation is strings, a valid peer and a time
		panic(err)
	}
	return b
}

// commit records next (the list was prev) with one outcome
// (durable.Record.Commit), which it returns: recorded reports whether the
// record holds next once it returns. A nil error means both files hold
// next; with recorded false, that neither does (the backup may, when it
// could not be put back: harmless, see matchBackup); with recorded true,
// the error says what is amiss (the backup is behind, or the record may
// not survive a crash).
func (s *Store) commit(prev, next []byte) (recorded bool, err error) {
	recorded, err = s.record().Commit(prev, next)
	switch {
	case err == nil:
		s.degraded = nil
		return true, nil
	case recorded:
		err = fmt.Errorf("revocations record %w; the revocation is in force", err)
		s.degraded = err
		return true, err
	case int64(len(next)) > s.maxBytes():
		return false, fmt.Errorf("revocations record %w; with aokeyd stopped, remove the revocations of keys no key source holds any more from it and its backup", err)
	}
	return false, fmt.Errorf("revocations record %w", err)
}

// healBackup rewrites a backup a failed write left behind its record.
func (s *Store) healBackup() error {
	if s.degraded == nil || s.path == "" {
		return nil
	}
	if err := s.fault.Write(s.path+".bak", encodeRecord(s.list), 0o600); err != nil {
		return fmt.Errorf("revocations backup %s.bak is still behind its record: %w", s.path, err)
	}
	s.degraded = nil
	return nil
}

// Warning is the status warning while the backup is behind, or "".
func (s *Store) Warning() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.degraded == nil {
		return ""
	}
	return s.degraded.Error()
}

// index rebuilds the by-peer view (s.mu held, or s not shared yet).
func (s *Store) index() {
	s.peer = map[peer.Key][]Revocation{}
	for _, r := range s.list {
		if !r.Global() {
			s.peer[r.Peer] = append(s.peer[r.Peer], r)
		}
	}
}

// Add records r durably and only then puts it in force, or does neither.
// inForce false: nothing changed, on disk or in memory, and err says why.
// inForce true with an error: r is recorded and in force, but its backup
// is behind (or the record may not survive a crash), as err says. A
// revocation already recorded (Same) is in force: nothing is added.
func (s *Store) Add(r Revocation) (inForce bool, err error) {
	if r.Chain == "" || r.Key == "" {
		return false, fmt.Errorf("a revocation names a chain and a key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.list, r.Same) {
		return true, s.healBackup()
	}
	next := append(slices.Clone(s.list), r)
	if s.path != "" {
		if inForce, err = s.commit(encodeRecord(s.list), encodeRecord(next)); !inForce {
			return false, err
		}
	}
	s.list = next
	s.index()
	return true, err
}

// Count is the number of recorded revocations (it only grows).
func (s *Store) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// List is the recorded revocations, in the order they were recorded.
func (s *Store) List() []Revocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// Apply marks the recorded global revocations in snap (a snapshot the
// caller owns). Peer-scoped ones apply to a peer's answer (Scope).
func (s *Store) Apply(snap *keystore.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.list {
		if !r.Global() {
			continue
		}
		c := snap.Chains[r.Chain]
		if c == nil {
			continue
		}
		for i := range c.Keys {
			if c.Keys[i].Name == r.Key {
				c.Keys[i].Revoked = true
			}
		}
	}
}

// Scope applies the revocations scoped to the peer id to pk, the
// policy's answer for it (policy.PeerKeys.Revoke).
func (s *Store) Scope(pk *policy.PeerKeys, id peer.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.peer[id] {
		if r.Chain == pk.SourceChain {
			pk.Revoke(r.Key)
		}
	}
}

// Revoked is the names of chain's keys revoked for the peer id: every
// global revocation of the chain, and those scoped to id, each once, in
// the order they were recorded.
func (s *Store) Revoked(chain string, id peer.Key) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.list {
		if r.Chain == chain && (r.Global() || r.Peer == id) && !slices.Contains(out, r.Key) {
			out = append(out, r.Key)
		}
	}
	return out
}
