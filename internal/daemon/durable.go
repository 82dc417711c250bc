package daemon

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

// tempPrefix starts the names of writeDurable's temporary files, which
// live next to the file they replace.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// tempName names a temporary file for path: in its directory, random (a
// variable so that a test can plant something at the name).
var tempName = func(path string) string {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return filepath.Join(filepath.Dir(path), tempPrefix(path)+hex.EncodeToString(rnd[:]))
}

// The steps of writeDurable, named for writeFault.
const (
	stepCreate  = "create" // the temporary file
	stepWrite   = "write"
	stepSync    = "fsync"
	stepRename  = "rename" // over path
	stepSyncDir = "fsync-dir"
)

// writeFault, set by tests only, is asked before each step of writeDurable
// with the path being written and the step, and fails the step with the
// error it returns (nil: the step runs).
var writeFault func(path, step string) error

// writeDurable replaces path with data so that, once it returns nil, the
// new content survives a crash or power loss: a fresh temporary file with
// a random name in path's directory (O_EXCL|O_NOFOLLOW: never a file or
// symlink someone planted), written and fsynced, renamed over path, and
// the directory fsynced. On an error before the rename path is unchanged
// and the temporary file removed; after it (the directory fsync failed)
// the error is a *notDurableError: path holds data, but a crash may undo
// that.
func writeDurable(path string, data []byte, perm fs.FileMode) error {
	fault := func(step string) error {
		if writeFault == nil {
			return nil
		}
		return writeFault(path, step)
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
	if err := fault(stepCreate); err != nil {
		return err
	}
	var f *os.File
	for range 5 {
		name := tempName(path)
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
	if err := fault(stepWrite); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := fault(stepSync); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := fault(stepRename); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := fault(stepSyncDir); err != nil {
		return &notDurableError{fmt.Errorf("fsync %s: %w", dir, err)}
	}
	if err := syncDir(dir); err != nil {
		return &notDurableError{err}
	}
	return nil
}

// notDurableError is writeDurable's error once the rename is done: the
// file holds the new content, but its directory could not be fsynced, so
// a crash may bring the old content back.
type notDurableError struct{ err error }

func (e *notDurableError) Error() string {
	return e.err.Error() + " (the file was replaced, but a crash may undo that)"
}

func (e *notDurableError) Unwrap() error { return e.err }

// replaced reports whether err, from writeDurable, came after the rename:
// the file holds the new content.
func replaced(err error) bool {
	var nd *notDurableError
	return errors.As(err, &nd)
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

// removeStaleTemps removes temporary files a crash left behind by
// writeDurable for path (regular files only; Remove never follows a
// symlink, and a planted one is removed as it is).
func removeStaleTemps(path string) {
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
