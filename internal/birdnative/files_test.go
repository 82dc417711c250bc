package birdnative

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestIncludeFileNotRegular: a neighbor's include file that is not a
// regular file is never read nor written through: a FIFO does not block
// the pass or the executor's application, and a symlink's target is not copied
// into the keys directory when BIRD refuses the configure and the files
// are put back. Either is left as it is, with a warning naming it.
func TestIncludeFileNotRegular(t *testing.T) {
	const foreign = "# not aokeyd's: another program's file\n"
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere.conf")
			if err := os.WriteFile(target, []byte(foreign), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBirdEnvIdle(t, nil, "k1")
			file := e.file
			tc.plant(t, file)
			before, _ := os.Lstat(file)
			e.fb.setRefuse(true)
			e.start()
			// The passes and the executor's application go on (a fifo's
			// open would block them), and status names the file.
			testkit.NoBlock(t, 30*time.Second, []string{file}, func() {
				if !eventually(20*time.Second, func() bool { return warned(e.status(), "not a regular file") }) {
					t.Errorf("status %+v, want a warning that %s is not a regular file", e.status().Peers, file)
				}
			})
			e.stop()
			ents, err := os.ReadDir(e.dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, ent := range ents {
				p := filepath.Join(e.dir, ent.Name())
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), foreign) {
						t.Errorf("%s holds the symlink target's content", p)
					}
				}
			}
			if fi, err := os.Lstat(file); err != nil || fi.Mode().Type() != before.Mode().Type() {
				t.Errorf("%s after the passes: %v %v, want it left a %v", file, fi, err, before.Mode().Type())
			}
		})
	}
}

// TestKeysDirChecked: a keys directory others may write is refused at
// start, with the fix named (a key line planted there was kept and
// loaded by BIRD); one the bird group may read is taken.
func TestKeysDirChecked(t *testing.T) {
	for _, tc := range []struct {
		mode    os.FileMode
		wantErr string // "": taken
	}{
		{0o777, "chmod 0750"},
		{0o770, "chmod 0750"},
		{0o757, "chmod 0750"},
		{0o750, ""},
		{0o700, ""},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			keys := filepath.Join(dir, "keys")
			if err := os.Mkdir(keys, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(keys, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ExecOptions{Dir: keys, Control: filepath.Join(dir, "bird.ctl"), Bird: "true", PID: func() (int, error) { return 0, errors.New("none") }})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Open with keys dir mode %v: %v", tc.mode, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), keys) {
				t.Fatalf("Open with keys dir mode %v: %v, want an error naming %s and saying %q", tc.mode, err, keys, tc.wantErr)
			}
		})
	}
}
