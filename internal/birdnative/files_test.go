package birdnative

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// TestIncludeFileNotRegular: a neighbor's include file that is not a
// regular file is never read nor written through: a FIFO does not block
// the pass (the driver's one loop), and a symlink's target is not copied
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
			d, fb, _ := newTestDriver(t, "k1")
			file := filepath.Join(d.o.Dir, "192.0.2.2.conf")
			tc.plant(t, file)
			before, _ := os.Lstat(file)
			fb.mu.Lock()
			fb.refuse = true
			fb.mu.Unlock()
			testkit.NoBlock(t, 5*time.Second, []string{file}, func() { d.pass(context.Background(), nil, true) })
			ents, err := os.ReadDir(d.o.Dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				p := filepath.Join(d.o.Dir, e.Name())
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), foreign) {
						t.Errorf("%s holds the symlink target's content", p)
					}
				}
			}
			if fi, err := os.Lstat(file); err != nil || fi.Mode().Type() != before.Mode().Type() {
				t.Errorf("%s after the pass: %v %v, want it left a %v", file, fi, err, before.Mode().Type())
			}
			rep, err := d.Status(context.Background(), "")
			if err != nil || len(rep.Peers) != 1 || !strings.Contains(strings.Join(rep.Peers[0].Warnings, "\n"), "not a regular file") {
				t.Errorf("status %+v (%v), want a warning that %s is not a regular file", rep.Peers, err, file)
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
			kf := filepath.Join(dir, "keys.yaml")
			keyFile(t, kf, "k1")
			src, err := keystore.NewFile(keystore.FileOptions{Path: kf})
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Parse("policy.yaml", []byte(testPolicy))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(Options{Keys: keystore.NewCache(src, keystore.CacheOptions{}), Policy: pol, Dir: keys,
				Control: filepath.Join(dir, "bird.ctl"), Bird: "true", PID: func() (int, error) { return 0, errors.New("none") }})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New with keys dir mode %v: %v", tc.mode, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), keys) {
				t.Fatalf("New with keys dir mode %v: %v, want an error naming %s and saying %q", tc.mode, err, keys, tc.wantErr)
			}
		})
	}
}
