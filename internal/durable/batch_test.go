package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteBatch: every file of a batch is replaced with its content, its
// group and exact mode (the umask does not narrow it), a symlink at a path
// is replaced, never followed; one file that cannot be written (a
// directory at its path) fails alone; no temporary file is left.
func TestWriteBatch(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	var files []File
	for i := range batchOpen + 44 { // two rounds of open temporary files
		files = append(files, File{Path: filepath.Join(dir, fmt.Sprintf("10.0.%d.%d.conf", i/250, i%250)), Data: []byte(fmt.Sprintf("keys %d\n", i))})
	}
	if err := os.Symlink(victim, files[3].Path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(files[7].Path, 0o700); err != nil {
		t.Fatal(err)
	}
	gid := os.Getgid()
	errs := WriteBatch(files, 0o640, gid)
	for i, f := range files {
		if i == 7 {
			if errs[i] == nil {
				t.Errorf("a directory at %s: no error", f.Path)
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("%s: %v", f.Path, errs[i])
			continue
		}
		fi, err := os.Lstat(f.Path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: %v (%v), want a regular file 0640", f.Path, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(f.Path); string(b) != string(f.Data) {
			t.Errorf("%s holds %q, want %q", f.Path, b, f.Data)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the symlink's target now holds %q", b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
	// Again over the written files: replaced.
	files[0].Data = []byte("keys 0, again\n")
	if errs := WriteBatch(files[:1], 0o600, -1); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if b, _ := os.ReadFile(files[0].Path); string(b) != "keys 0, again\n" {
		t.Errorf("rewritten file holds %q", b)
	}
}
