package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aokeyd/aokeyd/internal/durable"
	"io/fs"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// Revocation is one recorded emergency revoke. Peer (and VRF, "" for the
// default VRF) scope it to one peer's sockets; without Peer it applies
// everywhere. Records written before scopes existed have no Peer and stay
// global.
type Revocation struct {
	Chain string    `json:"chain"`
	Key   string    `json:"key"`
	Peer  string    `json:"peer,omitempty"`
	VRF   string    `json:"vrf,omitempty"`
	At    time.Time `json:"at"`
}

// Global reports whether r applies to every peer.
func (r Revocation) Global() bool { return r.Peer == "" }

func (r Revocation) same(o Revocation) bool {
	return r.Chain == o.Chain && r.Key == o.Key && r.Peer == o.Peer && r.VRF == o.VRF
}

func (r Revocation) String() string {
	s := r.Chain + "/" + r.Key
	if r.Peer != "" {
		s += " for peer " + r.Peer
		if r.VRF != "" {
			s += " (vrf " + r.VRF + ")"
		}
	}
	return s
}

// revokeStore persists revocations (names only, never key material) so a
// restarted daemon does not re-install a revoked key even when the key
// source could not be told, or has not caught up.
//
// The record is a JSON list at path, the truth; path.bak is a copy that
// exists to restore a record found unreadable at start. Each revoke has
// one outcome, the same now and after a restart: it is recorded and in
// force, or neither. add writes the record, then the backup, each
// durably (durable.Write), and is done when both are. If the record write
// fails, nothing changed. If a write fails after the record was
// replaced (its backup's, or its own directory fsync), the record is put
// back to its previous content, and the backup too if it was replaced:
// nothing changed. Only if the record cannot be put back does it hold the
// revocation: then it is in force, and add says what failed (the backup
// is behind until the next revoke or start rewrites it). At start a
// readable record wins over its backup, which is rewritten to match.
type revokeStore struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	list []Revocation
	peer map[netip.Addr][]Revocation // the peer-scoped ones, by peer
	// degraded: the last write left the backup behind the record (or the
	// record not durable); nil once a write or a start has put it right.
	degraded error
}

// recordHelp says what an operator can do about an unreadable record.
const recordHelp = "aokeyd will not start without it, so that no revoked key is re-installed: " +
	"restore it, as a regular file, from a backup; or, only if you know which keys are revoked, " +
	`write them as a JSON list ([{"chain":"CHAIN","key":"KEY","at":"2026-01-02T15:04:05Z"}], or [] for none) and start again`

// record is the revocations record in the shared record layer (read when
// used: a test lowers maxRecordBytes).
func (s *revokeStore) record() durable.Record {
	return durable.Record{Path: s.path, Max: maxRecordBytes, Check: func(b []byte) error {
		_, err := parseRecord(b)
		return err
	}}
}

func openRevokeStore(path string, log *slog.Logger) (*revokeStore, error) {
	s := &revokeStore{path: path, log: log}
	if path == "" {
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
func (s *revokeStore) matchBackup(l durable.Loaded, bak []Revocation, bakErr error) {
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
		if !slices.ContainsFunc(b, r.same) {
			out = append(out, r)
		}
	}
	return out
}

var errBadRecord = errors.New("not a revocations record")

// maxRecordBytes caps what a read of the record takes. A record holds names only,
// about 100 bytes a revocation, so this is over 100,000 revocations: a
// larger file is not one aokeyd wrote, and reading it whole could exhaust
// memory (a symlink to /dev/zero once did).
var maxRecordBytes int64 = 16 << 20 // a variable so that a test can lower it

// parseRecord is the revocations of a record file's content.
func parseRecord(b []byte) ([]Revocation, error) {
	var list []Revocation
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	if list == nil { // `null`: no list, not an empty one
		return nil, fmt.Errorf("%w: null, not a list", errBadRecord)
	}
	for i, r := range list {
		if r.Chain == "" || r.Key == "" {
			return nil, fmt.Errorf("%w: entry %d lacks its chain or key", errBadRecord, i+1)
		}
		if r.Peer == "" && r.VRF != "" {
			return nil, fmt.Errorf("%w: entry %d has a vrf but no peer", errBadRecord, i+1)
		}
		if r.Peer != "" {
			a, err := netip.ParseAddr(r.Peer)
			if err != nil {
				return nil, fmt.Errorf("%w: entry %d: peer %q is not an address", errBadRecord, i+1, r.Peer)
			}
			list[i].Peer = a.String()
		}
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
	if err != nil { // a Revocation is strings and a time
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
func (s *revokeStore) commit(prev, next []byte) (recorded bool, err error) {
	recorded, err = s.record().Commit(prev, next)
	switch {
	case err == nil:
		s.degraded = nil
		return true, nil
	case recorded:
		err = fmt.Errorf("revocations record %w; the revocation is in force", err)
		s.degraded = err
		return true, err
	case int64(len(next)) > maxRecordBytes:
		return false, fmt.Errorf("revocations record %w; with aokeyd stopped, remove the revocations of keys no key source holds any more from it and its backup", err)
	}
	return false, fmt.Errorf("revocations record %w", err)
}

// healBackup rewrites a backup a failed write left behind its record.
func (s *revokeStore) healBackup() error {
	if s.degraded == nil || s.path == "" {
		return nil
	}
	if err := durable.Write(s.path+".bak", encodeRecord(s.list), 0o600); err != nil {
		return fmt.Errorf("revocations backup %s.bak is still behind its record: %w", s.path, err)
	}
	s.degraded = nil
	return nil
}

// warning is the status warning while the backup is behind, or "".
func (s *revokeStore) warning() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.degraded == nil {
		return ""
	}
	return s.degraded.Error()
}

// index rebuilds the by-peer view (s.mu held, or s not shared yet).
func (s *revokeStore) index() {
	s.peer = map[netip.Addr][]Revocation{}
	for _, r := range s.list {
		if a, err := netip.ParseAddr(r.Peer); err == nil {
			s.peer[a] = append(s.peer[a], r)
		}
	}
}

// add records r durably and only then puts it in force, or does neither.
// inForce false: nothing changed, on disk or in memory, and err says why.
// inForce true with an error: r is recorded and in force, but its backup
// is behind (or the record may not survive a crash), as err says.
func (s *revokeStore) add(r Revocation) (inForce bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.list, r.same) {
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

// count is the number of recorded revocations (it only grows).
func (s *revokeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// apply marks the recorded global revocations in snap (a snapshot the
// caller owns). Peer-scoped ones apply to a peer's answer (scope).
func (s *revokeStore) apply(snap *keystore.Snapshot) {
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

// scope applies the revocations scoped to peer in vrf to pk, the policy's
// answer for that peer.
func (s *revokeStore) scope(pk *policy.PeerKeys, peer netip.Addr, vrf string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.peer[peer.Unmap().WithZone("")] {
		if r.VRF == vrf && r.Chain == pk.SourceChain {
			pk.Revoke(r.Key)
		}
	}
}

// equalRevocations reports whether a and b are the same list.
func equalRevocations(a, b []Revocation) bool {
	return slices.EqualFunc(a, b, func(x, y Revocation) bool { return x.same(y) && x.At.Equal(y.At) })
}
