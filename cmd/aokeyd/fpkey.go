package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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
// others may read or write is refused.
func useFingerprintKey(stateDir string) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
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

func readFingerprintKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %s: the fingerprint key must be a regular file only aokeyd can read (chmod 600 %s)", path, st.Mode(), path)
	}
	k := make([]byte, tcpao.FingerprintKeyLen)
	if n, err := io.ReadFull(f, k); err != nil {
		clear(k)
		return nil, fmt.Errorf("%s: %d bytes, want %d (move it aside: a new one is made, and the ownership record starts afresh)", path, n, tcpao.FingerprintKeyLen)
	}
	return k, nil
}

func createFingerprintKey(path string) ([]byte, error) {
	k := make([]byte, tcpao.FingerprintKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
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
	if err != nil {
		clear(k)
		_ = os.Remove(path)
		return nil, fmt.Errorf("write the fingerprint key %s: %w", path, err)
	}
	return k, nil
}
