package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestFingerprintKeyFile: the key is made once (0600) and read back the
// same; a file others may read, or of the wrong length, is refused with
// the fix.
func TestFingerprintKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, fingerprintKeyFile)
	made, err := createFingerprintKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", st.Mode(), err)
	}
	got, err := readFingerprintKey(path, true)
	if err != nil || !bytes.Equal(got, made) {
		t.Fatalf("read back: %v, same=%t", err, bytes.Equal(got, made))
	}
	if _, err := createFingerprintKey(path); err == nil {
		t.Fatal("a second key was made over the first")
	}
	for _, tc := range []struct {
		name string
		mode os.FileMode
		data []byte
		want string
	}{
		{"readable by others", 0o644, made, "chmod 600"},
		{"short", 0o600, made[:7], "move it aside"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		for _, repair := range []bool{false, true} {
			if _, err := readFingerprintKey(p, repair); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (repair %t): err %v, want one saying %q", tc.name, repair, err, tc.want)
			}
		}
	}
}

// TestFingerprintKeyNotRegular: the fingerprint key is read only as a
// regular file: a FIFO is refused at once (it once blocked the start
// waiting for a writer), a symlink is not followed, and a state directory
// others may write is refused with the fix.
func TestFingerprintKeyNotRegular(t *testing.T) {
	good := bytes.Repeat([]byte{7}, tcpao.FingerprintKeyLen)
	for _, tc := range []struct {
		name  string
		plant func(dir, path string) error
		want  string // in the error
	}{
		{"fifo", func(_, p string) error { return syscall.Mkfifo(p, 0o600) }, "FIFO"},
		{"symlink to a good key", func(dir, p string) error {
			if err := os.WriteFile(filepath.Join(dir, "elsewhere"), good, 0o600); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(dir, "elsewhere"), p)
		}, "symlink"},
		{"oversized", func(_, p string) error { return os.WriteFile(p, bytes.Repeat(good, 1000), 0o600) }, "larger"},
		{"world-writable state directory", func(dir, _ string) error { return os.Chmod(dir, 0o777) }, "chmod 0750"},
		{"group-writable state directory", func(dir, _ string) error { return os.Chmod(dir, 0o770) }, "chmod 0750"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, fingerprintKeyFile)
			if err := tc.plant(dir, path); err != nil {
				t.Fatal(err)
			}
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{path}, func() { _, err = chooseFingerprintKey(dir) })
			// The test's name is in dir: it must not make the match.
			if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir, "DIR"), tc.want) {
				t.Fatalf("chooseFingerprintKey: %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), string(good)) {
				t.Fatal("the error holds the key's bytes")
			}
		})
	}
}

// TestFingerprintKeyBackup: the key is made with a backup, which gives it
// back when the key file is lost or replaced by something that is not a
// regular file of the key's length: the ownership record's fingerprints
// stay meaningful.
func TestFingerprintKeyBackup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(path string) error
	}{
		{"removed", os.Remove},
		{"truncated", func(p string) error { return os.Truncate(p, 3) }},
		{"replaced by a fifo", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return syscall.Mkfifo(p, 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), fingerprintKeyFile)
			made, err := createFingerprintKey(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.spoil(path); err != nil {
				t.Fatal(err)
			}
			// The start's first read writes nothing and chooses the
			// backup's key; the read after its checks restores the file.
			var got []byte
			testkit.NoBlock(t, 5*time.Second, []string{path}, func() { got, err = readFingerprintKey(path, false) })
			if err != nil || !bytes.Equal(got, made) {
				t.Fatalf("read without repair after the key file was %s: %v, same key %t", tc.name, err, bytes.Equal(got, made))
			}
			if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Size() == tcpao.FingerprintKeyLen {
				t.Fatalf("the read without repair restored the key file")
			}
			testkit.NoBlock(t, 5*time.Second, []string{path}, func() { got, err = readFingerprintKey(path, true) })
			if err != nil || !bytes.Equal(got, made) {
				t.Fatalf("read after the key file was %s: %v, same key %t", tc.name, err, bytes.Equal(got, made))
			}
			if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
				t.Errorf("key file after the restore: %v %v, want a regular 0600 file", st, err)
			}
		})
	}
}
