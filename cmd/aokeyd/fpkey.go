package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/tcpao"
)

// fingerprintKeyFile is the key the fingerprints in the ownership record
// (owned-keys.json) are computed with, kept in the state directory so that
// they stay the same across restarts.
const fingerprintKeyFile = "fingerprint.key"

// fingerprintKey is the process's fingerprint key (tcpao.SetFingerprintKey),
// the one the state directory keeps. It is chosen at start before any key
// is read, and written only once nothing refuses the start (keep): a
// refused start writes nothing, neither the state directory nor the key.
type fingerprintKey struct {
	stateDir string
	key      []byte // cleared by keep
}

// chooseFingerprintKey makes the state directory's fingerprint key the
// process's, read without writing anything (durable.Record.Peek), or a new
// random one when there is none yet (no state directory, no key file):
// called before any key is read. The key and the ownership record
// together let whoever reads them test guesses of a secret offline, so
// the file must be readable by aokeyd alone: a file that others may read
// or write is refused, and so is a state directory others may write
// (durable.CheckDir). The key is a durable.Record: read as a regular file
// only (never through a symlink, never blocking on a FIFO), kept with a
// backup, fingerprint.key.bak, that restores a key found missing or
// unreadable.
func chooseFingerprintKey(stateDir string) (*fingerprintKey, error) {
	if err := durable.CheckDir(stateDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	k, err := readFingerprintKey(filepath.Join(stateDir, fingerprintKeyFile), false)
	if errors.Is(err, fs.ErrNotExist) {
		k = make([]byte, tcpao.FingerprintKeyLen)
		_, err = rand.Read(k)
	}
	if err != nil {
		clear(k)
		return nil, err
	}
	if err := tcpao.SetFingerprintKey(k); err != nil {
		clear(k)
		return nil, fmt.Errorf("%s: %w", filepath.Join(stateDir, fingerprintKeyFile), err)
	}
	return &fingerprintKey{stateDir: stateDir, key: k}, nil
}

// keep writes the state directory (mode 0700) and the chosen key, when
// there is none yet; with a key there, it makes the repairs a start makes
// (durable.Record.Load: the backup rewritten, a lost primary restored)
// and checks that it is still the chosen one.
func (f *fingerprintKey) keep() error {
	defer clear(f.key)
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := durable.CheckDir(f.stateDir); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(f.stateDir, fingerprintKeyFile)
	k, err := readFingerprintKey(path, true)
	if errors.Is(err, fs.ErrNotExist) {
		return writeFingerprintKey(path, f.key)
	}
	if err != nil {
		return err
	}
	defer clear(k)
	if !bytes.Equal(k, f.key) {
		return fmt.Errorf("%s changed while aokeyd started (another aokeyd on the state directory %s?): start aokeyd again", path, f.stateDir)
	}
	return nil
}

// fingerprintKeyRecord is the key file at path in the record layer.
func fingerprintKeyRecord(path string) durable.Record {
	return durable.Record{Path: path, Max: tcpao.FingerprintKeyLen, Check: func(b []byte) error {
		if len(b) != tcpao.FingerprintKeyLen {
			return fmt.Errorf("%d bytes, want %d", len(b), tcpao.FingerprintKeyLen)
		}
		return nil
	}}
}

// readFingerprintKey is the key at path (from its backup when it is
// missing or unreadable), fs.ErrNotExist when neither exists. With
// repair, the record is loaded as a start does (durable.Record.Load:
// the backup rewritten, a lost primary restored from it); without,
// nothing is written (Peek), and the same key is chosen.
func readFingerprintKey(path string, repair bool) ([]byte, error) {
	load := fingerprintKeyRecord(path).Peek
	if repair {
		load = fingerprintKeyRecord(path).Load
	}
	l, err := load()
	if err != nil {
		return nil, fmt.Errorf("the fingerprint key %w (move it aside: a new one is made, and the ownership record starts afresh)", err)
	}
	if l.From == durable.None {
		return nil, fs.ErrNotExist
	}
	if !repair && l.From == durable.Backup {
		// The primary is missing or no good record: Load restores it
		// from the backup, mode 0600.
		return l.Data, nil
	}
	// Load read a regular file in a directory only aokeyd may write:
	// its mode is the one it had when read.
	if st, err := os.Lstat(path); err != nil || st.Mode().Perm()&0o077 != 0 {
		clear(l.Data)
		mode := "unknown"
		if err == nil {
			mode = st.Mode().String()
		}
		return nil, fmt.Errorf("%s: mode %s: the fingerprint key must be a regular file only aokeyd can read (chmod 600 %s)", path, mode, path)
	}
	return l.Data, nil
}

// createFingerprintKey makes a new key at path (never over a file there:
// O_EXCL) and its backup.
func createFingerprintKey(path string) ([]byte, error) {
	k := make([]byte, tcpao.FingerprintKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := writeFingerprintKey(path, k); err != nil {
		clear(k)
		return nil, err
	}
	return k, nil
}

// writeFingerprintKey writes k as the key at path (never over a file
// there: O_EXCL) and its backup; on an error, neither is left.
func writeFingerprintKey(path string, k []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create the fingerprint key: %w", err)
	}
	_, err = f.Write(k)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.Write(fingerprintKeyRecord(path).BackupPath(), k, 0o600)
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write the fingerprint key %s: %w", path, err)
	}
	return nil
}
