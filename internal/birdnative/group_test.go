package birdnative

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
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
		e := newBirdEnv(t, func(o *ExecOptions) {
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
		file := e.file
		e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
		check(t, file, gid, 0o640)
		e.setKeys("k1", "k2") // a rewrite
		e.waitFile("the rewrite", func(s string) bool { return strings.Contains(s, "send id 2;") })
		check(t, file, gid, 0o640)
	})
	t.Run("none", func(t *testing.T) {
		e := newBirdEnv(t, nil, "k1")
		e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
		check(t, e.dir, -1, 0o700)
		check(t, e.file, -1, 0o600)
	})
}

// TestSessionUnreadIsWarned (issue 48): in the systemd guest, two BIRDs
// (the router's and the lab's far end) made "the bird process" ambiguous;
// the driver then read no session, said nothing, and kept the rolled-out
// key forever as "no session is up". A BIRD it cannot find, or a session
// it cannot read, is a warning naming the error, and a key no longer
// desired is kept for that reason.
func TestSessionUnreadIsWarned(t *testing.T) {
	e := newBirdEnv(t, func(o *ExecOptions) {
		o.PID = func() (int, error) {
			return 0, errors.New("more than one bird process (12, 34): set speaker.bird.pid_file")
		}
	}, "k1")
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
	e.setKeys("k2@2") // k1 leaves the key source
	e.waitFile("k2 added", func(s string) bool { return strings.Contains(s, "send id 1;") && strings.Contains(s, "send id 2;") })
	var rep control.StatusReport
	if !eventually(10*time.Second, func() bool { rep = e.status(); return warned(rep, "could not be read") }) {
		t.Fatalf("no warning keeps k1 because BIRD's session could not be read: %+v", rep.Peers)
	}
	if !warned(rep, "more than one bird process") {
		t.Fatalf("no warning names why BIRD's sessions were not read: %q %+v", rep.Warnings, rep.Peers)
	}
	if warned(rep, "no session is up") {
		t.Fatalf("k1 kept as for no session, while the session was never read: %+v", rep.Peers)
	}
}
