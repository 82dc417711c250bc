package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tempPrefix starts the names of Write's temporary files, which
// live next to the file they replace.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// tempName names a temporary file for path: in its directory, random.
func tempName(path string) string {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return filepath.Join(filepath.Dir(path), tempPrefix(path)+hex.EncodeToString(rnd[:]))
}

// The steps of Write, named for Fault.
const (
	StepCreate  = "create" // the temporary file
	StepWrite   = "write"
	StepSync    = "fsync"
	StepRename  = "rename" // over path
	StepSyncDir = "fsync-dir"
)

// Fault, when set, is asked before each step of a write (StepCreate,
// StepWrite, StepSync, StepRename, StepSyncDir) with the path being
// written, and fails the step with the error it returns (nil: the step
// runs): how tests make a disk fail a write at a chosen step. The zero
// Fault asks nothing. It is an option of each writer (Fault.Write,
// Record.Fault), never a package-wide hook.
type Fault func(path, step string) error

// Write is the package's Write, asking f before each step.
func (f Fault) Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, -1, tempName, f)
}

// WriteGroup is the package's WriteGroup, asking f before each step.
func (f Fault) WriteGroup(path string, data []byte, perm fs.FileMode, gid int) error {
	return write(path, data, perm, gid, tempName, f)
}

// Write replaces path with data so that, once it returns nil, the
// new content survives a crash or power loss: a fresh temporary file with
// a random name in path's directory (O_EXCL|O_NOFOLLOW: never a file or
// symlink someone planted), written and fsynced, renamed over path, and
// the directory fsynced. On an error before the rename path is unchanged
// and the temporary file removed; after it (the directory fsync failed)
// the error is a *NotDurableError: path holds data, but a crash may undo
// that.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, -1, tempName, nil)
}

// WriteGroup is Write for a file another daemon's group reads (BIRD's
// include files, read by BIRD after it dropped to its own user): the new
// file gets group gid and exactly perm (the process's umask does not
// narrow it), both set on the temporary file before the rename, so that
// path is never, even for an instant, a file its reader cannot open.
func WriteGroup(path string, data []byte, perm fs.FileMode, gid int) error {
	return write(path, data, perm, gid, tempName, nil)
}

// write is Write and WriteGroup (gid -1: the process's group), naming the
// temporary file with nameFor (tempName; a test plants something at the
// name it gives), asking f (when set) before each step.
func write(path string, data []byte, perm fs.FileMode, gid int, nameFor func(path string) string, ask Fault) error {
	fault := func(step string) error {
		if ask == nil {
			return nil
		}
		return ask(path, step)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// The new directory's entry must survive a crash too.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	if err := fault(StepCreate); err != nil {
		return err
	}
	var f *os.File
	for range 5 {
		name := nameFor(path)
		var err error
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	if f == nil {
		return fmt.Errorf("%s: no free temporary file name", dir)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if gid >= 0 {
		if err := f.Chown(-1, gid); err != nil {
			return fail(err)
		}
		if err := f.Chmod(perm); err != nil {
			return fail(err)
		}
	}
	if err := fault(StepWrite); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := fault(StepSync); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := fault(StepRename); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := fault(StepSyncDir); err != nil {
		return &NotDurableError{fmt.Errorf("fsync %s: %w", dir, err)}
	}
	if err := syncDir(dir); err != nil {
		return &NotDurableError{err}
	}
	return nil
}

// NotDurableError is Write's error once the rename is done: the
// file holds the new content, but its directory could not be fsynced, so
// a crash may bring the old content back.
type NotDurableError struct{ err error }

func (e *NotDurableError) Error() string {
	return e.err.Error() + " (the file was replaced, but a crash may undo that)"
}

func (e *NotDurableError) Unwrap() error { return e.err }

// Replaced reports whether err, from Write or Record.Save, came after
// the rename: the file (the record's primary) holds the new content.
func Replaced(err error) bool {
	var nd *NotDurableError
	var be *BehindError
	return errors.As(err, &nd) || errors.As(err, &be)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// RemoveStaleTemps removes temporary files a crash left behind by
// Write for path (regular files only; Remove never follows a
// symlink, and a planted one is removed as it is).
func RemoveStaleTemps(path string) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) {
			os.Remove(filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
}
