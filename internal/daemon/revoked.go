package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
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
// The record is a JSON list at path, with a copy at path.bak. Every change
// writes the backup first, then the record, each durably (writeDurable):
// the backup is therefore never behind the record, and a record found
// unreadable at start can be replaced by its backup without losing a
// revocation. The in-memory list changes only after both writes.
type revokeStore struct {
	path string
	mu   sync.Mutex
	list []Revocation
	peer map[netip.Addr][]Revocation // the peer-scoped ones, by peer
}

// recordHelp says what an operator can do about an unreadable record.
const recordHelp = "aokeyd will not start without it, so that no revoked key is re-installed: " +
	"restore it, as a regular file, from a backup; or, only if you know which keys are revoked, " +
	`write them as a JSON list ([{"chain":"CHAIN","key":"KEY","at":"2026-01-02T15:04:05Z"}], or [] for none) and start again`

func openRevokeStore(path string, log *slog.Logger) (*revokeStore, error) {
	s := &revokeStore{path: path}
	if path == "" {
		return s, nil
	}
	removeStaleTemps(path)
	removeStaleTemps(path + ".bak")
	rec, recErr := readRecord(path)
	bak, bakErr := readRecord(path + ".bak")
	switch {
	case recErr == nil && rec != nil:
		s.list = rec
		var extra []Revocation
		for _, r := range bak {
			if !slices.ContainsFunc(rec, r.same) {
				extra = append(extra, r)
			}
		}
		if len(extra) > 0 {
			// A revoke interrupted between the two writes: it was not
			// confirmed, but keeping it is the safe side.
			log.Warn("the revocations backup holds revocations its record lacks (a revoke interrupted by a crash): keeping them",
				"file", path, "backup", path+".bak", "extra", fmt.Sprint(extra))
			s.list = append(s.list, extra...)
		}
	case errors.Is(recErr, fs.ErrNotExist) && errors.Is(bakErr, fs.ErrNotExist):
		// No revocation ever recorded.
	case bakErr == nil && (errors.Is(recErr, fs.ErrNotExist) || errors.Is(recErr, errBadRecord)):
		why := "is missing"
		if recErr != nil && !errors.Is(recErr, fs.ErrNotExist) {
			why = "is unreadable (" + recErr.Error() + "; kept as " + path + ".corrupt)"
			if err := os.Rename(path, path+".corrupt"); err != nil {
				return nil, fmt.Errorf("revocations record %s is unreadable (%v) and cannot be set aside: %w", path, recErr, err)
			}
		}
		log.Error("REVOCATIONS RECORD "+why+": using its backup, which is written before the record and so holds every revocation it did; "+
			"check the disk, and to clear revocations on purpose remove both files while aokeyd is stopped",
			"file", path, "backup", path+".bak", "revocations", len(bak))
		s.list = bak
		if err := s.write(bak); err != nil {
			return nil, fmt.Errorf("revocations %s: restoring it from its backup: %w", path, err)
		}
	case recErr != nil && !errors.Is(recErr, fs.ErrNotExist):
		bakState := "is missing"
		if bakErr != nil && !errors.Is(bakErr, fs.ErrNotExist) {
			bakState = "is unreadable too (" + bakErr.Error() + ")"
		}
		return nil, fmt.Errorf("revocations record %s is unreadable: %w; its backup %s.bak %s. %s", path, recErr, path, bakState, recordHelp)
	default: // the record is missing and the backup unreadable
		return nil, fmt.Errorf("revocations record %s is missing and its backup %s.bak is unreadable: %w. %s", path, path, bakErr, recordHelp)
	}
	s.index()
	return s, nil
}

var errBadRecord = errors.New("not a revocations record")

// maxRecordBytes caps what readRecord reads. A record holds names only,
// about 100 bytes a revocation, so this is over 100,000 revocations: a
// larger file is not one aokeyd wrote, and reading it whole could exhaust
// memory (a symlink to /dev/zero once did).
const maxRecordBytes = 16 << 20

// readRecord reads one record file: nil, fs.ErrNotExist when there is
// none, an error wrapping errBadRecord when it is not a regular file (a
// symlink, dangling or not, a FIFO, a device), is larger than
// maxRecordBytes, empty, null or corrupt.
func readRecord(path string) ([]Revocation, error) {
	// O_NOFOLLOW: a symlink fails with ELOOP, never read through.
	// O_NONBLOCK: a FIFO opens at once instead of waiting for a writer,
	// and is refused below without being read.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		target, _ := os.Readlink(path)
		return nil, fmt.Errorf("%w: a symlink (to %q); the record is read only as a regular file", errBadRecord, target)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s, not a regular file", errBadRecord, fileKind(fi.Mode()))
	}
	tooBig := fmt.Errorf("%w: larger than %d MiB, more than any record aokeyd writes", errBadRecord, maxRecordBytes>>20)
	if fi.Size() > maxRecordBytes {
		return nil, tooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecordBytes { // it grew since the Stat
		return nil, tooBig
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: zero-length file", errBadRecord)
	}
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

// write records list durably: the backup, then the record.
func (s *revokeStore) write(list []Revocation) error {
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	for _, p := range []string{s.path + ".bak", s.path} {
		if err := writeDurable(p, b, 0o600); err != nil {
			return fmt.Errorf("revocations record %s: %w", s.path, err)
		}
	}
	return nil
}

// fileKind names a file type that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
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

// add records r durably and only then puts it in force. An error means
// nothing changed, on disk or in memory.
func (s *revokeStore) add(r Revocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.list, r.same) {
		return nil
	}
	next := append(slices.Clone(s.list), r)
	if s.path != "" {
		if err := s.write(next); err != nil {
			return err
		}
	}
	s.list = next
	s.index()
	return nil
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
