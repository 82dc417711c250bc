package durable

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Record is a file kept with a backup, PATH.bak: the primary is the
// truth, the backup exists to restore a primary found unreadable at
// Load. Save writes the primary, then the backup, each durably.
type Record struct {
	Path string
	// Max caps each copy's size: a larger file is not one aokeyd wrote,
	// and is refused unread.
	Max int64
	// Check tells whether data is a good record (nil: any non-empty
	// data is). Its error, naming what is wrong and never the content,
	// makes the copy unreadable, as a FIFO or a zero-length file is.
	Check func(data []byte) error
	// Fault, when set, is asked before each step of each write (tests:
	// a disk that fails a chosen step).
	Fault Fault
}

// ErrCorrupt is in the error of a copy that exists but is no good record:
// not a regular file, too large, empty, or refused by Check.
var ErrCorrupt = errors.New("not a good record")

// corruptError marks err as ErrCorrupt without changing its text.
type corruptError struct{ err error }

func (e corruptError) Error() string        { return e.err.Error() }
func (e corruptError) Unwrap() []error      { return []error{e.err, ErrCorrupt} }
func corrupt(format string, a ...any) error { return corruptError{fmt.Errorf(format, a...)} }

// Source is the copy Load used.
type Source int

const (
	None    Source = iota // neither copy exists: no record yet
	Primary               // the primary, good
	Backup                // the backup: the primary was missing or unreadable, and is restored from it
)

// Loaded is what Load found.
type Loaded struct {
	Data []byte // the record's content (nil with None)
	From Source
	// PrimaryErr is why the primary was not used (From Backup): an error
	// satisfying fs.ErrNotExist when it was missing, else ErrCorrupt.
	PrimaryErr error
	// SetAside is where an unreadable primary was moved (PATH.corrupt).
	SetAside string
	// Backup and BackupErr are the backup as Load found it, for a caller
	// that says how it differed (From Primary).
	Backup    []byte
	BackupErr error
	// BackupWritten: Load rewrote the backup from the primary, which it
	// differed from; BackupWriteErr: that failed (the record is good,
	// but a primary lost now could not be restored).
	BackupWritten  bool
	BackupWriteErr error
}

// BackupPath is r's backup.
func (r Record) BackupPath() string { return r.Path + ".bak" }

// ReadCopy reads one copy of r (the primary, the backup, or another):
// fs.ErrNotExist when there is none, an error satisfying ErrCorrupt when
// it is no good record.
func (r Record) ReadCopy(path string) ([]byte, error) {
	b, err := Read(path, r.Max)
	if errors.Is(err, ErrNotRegular) || errors.Is(err, ErrTooLarge) {
		return nil, corruptError{err}
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, corrupt("a zero-length file")
	}
	if r.Check != nil {
		if err := r.Check(b); err != nil {
			clear(b)
			return nil, corruptError{err}
		}
	}
	return b, nil
}

// Load reads the record at start. A good primary is used, and the backup
// rewritten from it when it differs. A primary that is missing, or
// unreadable (ErrCorrupt: it is set aside as PATH.corrupt, never
// removed), is restored from a good backup. Neither existing is None.
// Every other case is an error naming both files and what was wrong with
// each: the record is not invented. It first checks the directory
// (CheckDir) and removes temporary files a crash left behind.
func (r Record) Load() (Loaded, error) { return r.load(true) }

// Peek is Load without writing anything: the same copy chosen, the same
// data and the same errors, but no temporary file removed, no backup
// rewritten, no primary set aside or restored (SetAside and
// BackupWritten stay unset). A start that may yet be refused reads its
// records so, and writes nothing before its checks pass; Load then
// chooses the same copy, as long as no one else wrote in between.
func (r Record) Peek() (Loaded, error) { return r.load(false) }

// load is Load, with its repairs only when repair is set.
func (r Record) load(repair bool) (Loaded, error) {
	if err := CheckDir(filepath.Dir(r.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Loaded{}, err
	}
	if repair {
		RemoveStaleTemps(r.Path)
		RemoveStaleTemps(r.BackupPath())
	}
	pri, priErr := r.ReadCopy(r.Path)
	bak, bakErr := r.ReadCopy(r.BackupPath())
	missing := func(err error) bool { return errors.Is(err, fs.ErrNotExist) }
	switch {
	case priErr == nil:
		l := Loaded{Data: pri, From: Primary, Backup: bak, BackupErr: bakErr}
		if repair && (bakErr != nil || !bytes.Equal(bak, pri)) {
			l.BackupWritten = true
			l.BackupWriteErr = r.Fault.Write(r.BackupPath(), pri, 0o600)
		}
		return l, nil
	case missing(priErr) && missing(bakErr):
		return Loaded{From: None}, nil
	case bakErr == nil && (missing(priErr) || errors.Is(priErr, ErrCorrupt)):
		l := Loaded{Data: bak, From: Backup, PrimaryErr: priErr, Backup: bak}
		if !repair {
			return l, nil
		}
		if !missing(priErr) {
			l.SetAside = r.Path + ".corrupt"
			if err := os.Rename(r.Path, l.SetAside); err != nil {
				return Loaded{}, fmt.Errorf("%s is unreadable (%v) and cannot be set aside: %w", r.Path, priErr, err)
			}
		}
		if err := r.Fault.Write(r.Path, bak, 0o600); err != nil {
			return Loaded{}, fmt.Errorf("%s: restoring it from its backup %s: %w", r.Path, r.BackupPath(), err)
		}
		return l, nil
	case !missing(priErr):
		bakState := "is missing"
		switch {
		case bakErr == nil: // the primary's error is not ErrCorrupt: an I/O error, a permission
			bakState = "is good, but a primary that cannot be read for this reason is not replaced from it"
		case !missing(bakErr):
			bakState = "is unreadable too (" + bakErr.Error() + ")"
		}
		return Loaded{}, fmt.Errorf("%s is unreadable: %w; its backup %s %s", r.Path, priErr, r.BackupPath(), bakState)
	default: // the primary is missing and the backup unreadable
		return Loaded{}, fmt.Errorf("%s is missing and its backup %s is unreadable: %w", r.Path, r.BackupPath(), bakErr)
	}
}

// Save replaces the record with data: the primary, then the backup, each
// durably. An error before the primary was replaced leaves both as they
// were; after, the primary holds data and the error says what failed
// (Replaced reports it: the backup is behind, or the primary may not
// survive a crash).
func (r Record) Save(data []byte) error {
	if int64(len(data)) > r.Max {
		return fmt.Errorf("%s would be %d bytes, more than the %d a start reads back: nothing was written", r.Path, len(data), r.Max)
	}
	if err := r.Fault.Write(r.Path, data, 0o600); err != nil {
		return err
	}
	if err := r.Fault.Write(r.BackupPath(), data, 0o600); err != nil {
		return &BehindError{fmt.Errorf("backup %s: %w (the record %s was written; its backup is behind until the next write)", r.BackupPath(), err, r.Path)}
	}
	return nil
}

// BehindError is Save's error when the primary was written and its
// backup was not.
type BehindError struct{ err error }

func (e *BehindError) Error() string { return e.err.Error() }
func (e *BehindError) Unwrap() error { return e.err }

// Commit replaces the record's content prev (nil: none yet) with next so
// that the change has one outcome, the same now and after a restart: it
// is recorded, or not. recorded reports whether the primary holds next
// once Commit returns. A nil error means both copies hold next. With
// recorded false, neither does: a write that failed after the primary was
// replaced (the backup's, or the primary's directory fsync) puts the
// primary back, and the backup too when it was replaced (when that fails,
// the backup is ahead of the primary, which wins at the next Load: the
// error says so). With recorded true, the primary could not be put back:
// it holds next, and the error says what is amiss (the backup is behind
// until the next Commit or Load rewrites it).
func (r Record) Commit(prev, next []byte) (recorded bool, err error) {
	rec, bak := r.Path, r.BackupPath()
	if int64(len(next)) > r.Max {
		return false, fmt.Errorf("%s would be %d bytes, more than the %d a start reads back: nothing was written", rec, len(next), r.Max)
	}
	err = r.Fault.Write(rec, next, 0o600)
	if err != nil && !Replaced(err) {
		return false, fmt.Errorf("%s: %w (the record and its backup are as they were)", rec, err)
	}
	bakNext := false
	if err != nil {
		err = fmt.Errorf("%s: %w", rec, err)
	} else if berr := r.Fault.Write(bak, next, 0o600); berr != nil {
		bakNext = Replaced(berr)
		err = fmt.Errorf("backup %s: %w", bak, berr)
	} else {
		return true, nil
	}
	// The primary holds next, but the commit as a whole failed: put it back.
	if uerr := r.putBack(rec, prev); uerr != nil && !Replaced(uerr) {
		return true, fmt.Errorf("%w; putting the record %s back failed too (%w), so it holds the change; "+
			"its backup %s is rewritten at the next write or start: check the disk", err, rec, uerr, bak)
	}
	if bakNext {
		if uerr := r.putBack(bak, prev); uerr != nil && !Replaced(uerr) {
			err = fmt.Errorf("%w; the backup %s holds the change and could not be put back (%w): the record, which does not, wins at the next start", err, bak, uerr)
		}
	}
	return false, fmt.Errorf("%w; the record was put back, so nothing was recorded", err)
}

// putBack restores path to prev (nil: there was no file).
func (r Record) putBack(path string, prev []byte) error {
	if prev == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return syncDir(filepath.Dir(path))
	}
	return r.Fault.Write(path, prev, 0o600)
}
