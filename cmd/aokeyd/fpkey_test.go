package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	got, err := readFingerprintKey(path)
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
		if _, err := readFingerprintKey(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
