package main

import (
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

// useFingerprintKey loads the state directory's fingerprint key, creating
// it (random, mode 0600) on first use, and makes it the process's
// (tcpao.SetFingerprintKey): called before any key is read. The key and
// the record together let whoever reads them test guesses of a secret
// offline, so the file must be readable by aokeyd alone: a file that
// others may read or write is refused, and so is a state directory others
// may write (durable.CheckDir). The key is a durable.Record: read as a
// regular file only (never through a symlink, never blocking on a FIFO),
// kept with a backup, fingerprint.key.bak, that restores a key found
// missing or unreadable.
func useFingerprintKey(stateDir string) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := durable.CheckDir(stateDir); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(stateDir, fingerprintKeyFile)
	k, err := readFingerprintKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, err = createFingerprintKey(path)
	}
	if err != nil {
		return err
	}
	defer clear(k)
	if err := tcpao.SetFingerprintKey(k); err != nil {
		return fmt.Errorf("%s: %w", path, err)
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
// missing or unreadable), fs.ErrNotExist when neither exists.
func readFingerprintKey(path string) ([]byte, error) {
	l, err := fingerprintKeyRecord(path).Load()
	if err != nil {
		return nil, fmt.Errorf("the fingerprint key %w (move it aside: a new one is made, and the ownership record starts afresh)", err)
	}
	if l.From == durable.None {
		return nil, fs.ErrNotExist
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		clear(k)
		return nil, fmt.Errorf("create the fingerprint key: %w", err)
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
		clear(k)
		_ = os.Remove(path)
		return nil, fmt.Errorf("write the fingerprint key %s: %w", path, err)
	}
	return k, nil
}
