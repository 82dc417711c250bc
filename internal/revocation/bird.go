package revocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/aokeyd/aokeyd/internal/durable"
)

// BirdFile is where the BIRD driver kept its own revocations, beside this
// record, before it recorded them here: switching speaker.type then
// forgot every revocation.
const BirdFile = "bird-revocations.json"

// mergeBird takes into the record, once, the revocations an older BIRD
// driver kept in BirdFile in the same directory, so that an upgrade loses
// none whichever speaker it starts with:
//   - each revocation the record lacks is committed to it (one outcome:
//     all of them recorded, or the start is refused and nothing changed),
//     and only then are BirdFile and its backup removed: a crash between
//     the two merges again at the next start, which adds nothing twice;
//   - BirdFile is read as the record is (a regular file, capped, its
//     backup used when it is unreadable; an unreadable copy is set aside
//     as .corrupt, never removed); when neither copy can be read the start
//     is refused, naming it: its revocations must not be lost;
//   - an entry whose peer is no address was refused by the BIRD driver
//     when it was made, after it wrote it, and was never in force: it is
//     dropped, and logged.
func (s *Store) mergeBird() error {
	if filepath.Base(s.path) == BirdFile {
		return nil
	}
	old := durable.Record{Path: filepath.Join(filepath.Dir(s.path), BirdFile), Max: s.maxBytes(), Fault: s.fault, Check: func(b []byte) error {
		var ws []wire
		return json.Unmarshal(b, &ws)
	}}
	l, err := old.Peek()
	if err != nil {
		return fmt.Errorf("the BIRD driver's older revocations record %w; aokeyd merges it into %s at start, and will not start without it, "+
			"so that no revoked key is re-installed: restore it, as a regular file, from a backup; or, only if its revocations are recorded "+
			"elsewhere, remove it and its backup and start again", err, s.path)
	}
	if l.From == durable.None {
		return nil
	}
	var ws []wire
	_ = json.Unmarshal(l.Data, &ws) // Peek checked it
	var add []Revocation
	for i, w := range ws {
		r, err := revocationOf(w)
		if err != nil {
			s.log.Warn("an entry of the BIRD driver's older revocations record was never in force (BIRD refused it): not merged",
				"file", old.Path, "entry", i+1, "err", err)
			continue
		}
		if !slices.ContainsFunc(s.list, r.Same) && !slices.ContainsFunc(add, r.Same) {
			add = append(add, r)
		}
	}
	if len(add) > 0 {
		next := append(slices.Clone(s.list), add...)
		if recorded, err := s.commit(encodeRecord(s.list), encodeRecord(next)); !recorded {
			return fmt.Errorf("merging the BIRD driver's older revocations record %s into %s: %w", old.Path, s.path, err)
		} else if err != nil {
			s.log.Error("the BIRD driver's older revocations are recorded and in force, but the record is not whole: check the disk", "err", err)
		}
		s.list = next
		s.index()
	}
	s.log.Info("merged the BIRD driver's older revocations record into the revocations record, which every speaker reads; removing it",
		"from", old.Path, "into", s.path, "merged", len(add), "entries", len(ws))
	if l.From == durable.Backup && !errors.Is(l.PrimaryErr, fs.ErrNotExist) {
		if err := os.Rename(old.Path, old.Path+".corrupt"); err != nil {
			s.log.Warn("cannot set the unreadable merged record aside", "file", old.Path, "err", err)
		}
	}
	for _, p := range []string{old.Path, old.BackupPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove the merged record: the next start merges it again (adding nothing twice)", "file", p, "err", err)
		}
	}
	return nil
}
