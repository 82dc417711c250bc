package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Write never writes through something planted at its temporary
// name: a symlink (to a file or nowhere) or a file is left as it is, and
// the target keeps its content.
func TestWriteDurableTempNotFollowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(tmp, victim string) error
	}{
		{"symlink to a file", func(tmp, victim string) error { return os.Symlink(victim, tmp) }},
		{"dangling symlink", func(tmp, victim string) error { return os.Symlink(victim+".new", tmp) }},
		{"file", func(tmp, _ string) error { return os.WriteFile(tmp, []byte("planted"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "revocations.json")
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(dir, ".planted")
			if err := tc.plant(tmp, victim); err != nil {
				t.Fatal(err)
			}
			planted := func(string) string { return tmp }
			if err := write(path, []byte("[]"), 0o600, -1, planted, nil); err == nil {
				t.Errorf("Write through a planted %s succeeded", tc.name)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
				t.Errorf("victim now %q (%v), want it untouched", b, err)
			}
			if _, err := os.Lstat(victim + ".new"); !os.IsNotExist(err) {
				t.Errorf("the dangling symlink's target was created (%v)", err)
			}
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("%s exists after a failed write (%v)", path, err)
			}
		})
	}
}

// A write replaces the file and leaves no temporary file behind.
func TestWriteDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "revocations.json")
	for _, content := range []string{"[1]", "[1,2]"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("content %q (%v), want %q", b, err, content)
		}
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(ents) != 1 {
		t.Errorf("directory holds %v (%v), want the file alone", ents, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode(), err)
	}
}

// A step that fails before the rename leaves the file as it was and no
// temporary file; a failed directory fsync after it is a NotDurableError,
// and the file holds the new content.
func TestWriteDurableFaults(t *testing.T) {
	for _, step := range []string{StepCreate, StepWrite, StepSync, StepRename, StepSyncDir} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "revocations.json")
			if err := Write(path, []byte("[1]"), 0o600); err != nil {
				t.Fatal(err)
			}
			fault := Fault(func(p, s string) error {
				if p == path && s == step {
					return syscall.EIO
				}
				return nil
			})
			err := fault.Write(path, []byte("[1,2]"), 0o600)
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("Write: %v, want the injected EIO", err)
			}
			want := "[1]"
			if step == StepSyncDir {
				want = "[1,2]"
			}
			if Replaced(err) != (step == StepSyncDir) {
				t.Errorf("Replaced(%v) = %v, want %v", err, Replaced(err), step == StepSyncDir)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != want {
				t.Errorf("file holds %q (%v), want %q", b, err, want)
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 {
				t.Errorf("directory holds %v (%v), want the file alone", ents, err)
			}
		})
	}
}
