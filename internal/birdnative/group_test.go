package birdnative

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestIncludeFilesReadableByBirdGroup (issue 48): Debian runs BIRD as
// -u bird -g bird and BIRD reads its includes after dropping privileges,
// so the include files must be readable by BIRD's group on every write
// (a first write, a rewrite, a file left 0600 by an older aokeyd), with
// the unit's UMask=0077 in force; with no group they stay root's alone.
func TestIncludeFilesReadableByBirdGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root") // the host CI runs as root
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	const gid = 4242
	check := func(t *testing.T, path string, wantGID int, want fs.FileMode) {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != want || (wantGID >= 0 && int(st.Gid) != wantGID) {
			t.Fatalf("%s: mode %04o gid %d, want %04o gid %d", filepath.Base(path), fi.Mode().Perm(), st.Gid, want, wantGID)
		}
	}
	t.Run("group", func(t *testing.T) {
		// A file an older aokeyd left 0600 in a 0700 directory.
		var keysDir string
		d, _, kf := newTestDriverWith(t, func(o *Options) {
			keysDir = o.Dir
			if err := os.MkdirAll(o.Dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(o.Dir, "198.51.100.9.conf"), []byte(fileHeader), 0o600); err != nil {
				t.Fatal(err)
			}
			o.ReadGID = gid
		}, "k1")
		check(t, keysDir, gid, 0o750)
		check(t, filepath.Join(keysDir, "198.51.100.9.conf"), gid, 0o640)
		file := filepath.Join(keysDir, "192.0.2.2.conf")
		d.pass(context.Background(), nil, true)
		check(t, file, gid, 0o640)
		keyFile(t, kf, "k1", "k2") // a rewrite
		d.refresh(context.Background())
		d.pass(context.Background(), nil, true)
		b, _ := os.ReadFile(file)
		if len(b) == 0 {
			t.Fatal("no file")
		}
		check(t, file, gid, 0o640)
	})
	t.Run("none", func(t *testing.T) {
		d, _, _ := newTestDriverWith(t, nil, "k1")
		d.pass(context.Background(), nil, true)
		check(t, d.o.Dir, -1, 0o700)
		check(t, filepath.Join(d.o.Dir, "192.0.2.2.conf"), -1, 0o600)
	})
}

// TestSessionUnreadIsWarned (issue 48): in the systemd guest, two BIRDs
// (the router's and the lab's far end) made "the bird process" ambiguous;
// the driver then read no session, said nothing, and kept the rolled-out
// key forever as "no session is up". A BIRD it cannot find, or a session
// it cannot read, is a warning naming the error, and a key no longer
// desired is kept for that reason.
func TestSessionUnreadIsWarned(t *testing.T) {
	d, _, kf := newTestDriverWith(t, func(o *Options) {
		o.PID = func() (int, error) {
			return 0, errors.New("more than one bird process (12, 34): set speaker.bird.pid_file")
		}
	}, "k1")
	ctx := context.Background()
	d.pass(ctx, nil, true)
	keyFile(t, kf, "k2") // k1 leaves the key source
	d.refresh(ctx)
	d.pass(ctx, nil, true)
	rep, err := d.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, w := range rep.Warnings {
		warned = warned || strings.Contains(w, "more than one bird process")
	}
	for _, p := range rep.Peers {
		for _, w := range p.Warnings {
			warned = warned || strings.Contains(w, "more than one bird process")
		}
	}
	if !warned {
		t.Fatalf("no warning names why BIRD's sessions were not read: %q", rep.Warnings)
	}
	d.mu.Lock()
	views := d.views
	d.mu.Unlock()
	for _, v := range views {
		for _, k := range v.Kept {
			if k.Reason == keptNoSession {
				t.Fatalf("kept as %q, while the session was never read", k.Why)
			}
		}
	}
}
