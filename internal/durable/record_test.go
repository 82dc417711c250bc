package durable

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secretish is content no error may hold.
const secretish = "c0ffee-secret-content"

// Read takes regular files only, up to its cap: a FIFO is refused at once
// (an open without O_NONBLOCK waits for a writer), a symlink is never
// followed, a device or socket is refused unread; no error holds content.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plant   func(t *testing.T, p string)
		max     int64
		wantErr error // nil: reads secretish
	}{
		{"regular", writeFile(secretish), 64, nil},
		{"at the cap", writeFile(secretish), int64(len(secretish)), nil},
		{"over the cap", writeFile(secretish), int64(len(secretish)) - 1, ErrTooLarge},
		{"fifo", func(t *testing.T, p string) { must(t, syscall.Mkfifo(p, 0o600)) }, 64, ErrNotRegular},
		{"symlink to a regular file", func(t *testing.T, p string) {
			writeFile(secretish)(t, p+".real")
			must(t, os.Symlink(p+".real", p))
		}, 64, ErrNotRegular},
		{"symlink to /dev/zero", func(t *testing.T, p string) { must(t, os.Symlink("/dev/zero", p)) }, 64, ErrNotRegular},
		{"dangling symlink", func(t *testing.T, p string) { must(t, os.Symlink(p+".none", p)) }, 64, ErrNotRegular},
		{"directory", func(t *testing.T, p string) { must(t, os.Mkdir(p, 0o700)) }, 64, ErrNotRegular},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			must(t, err)
			t.Cleanup(func() { l.Close() })
		}, 64, ErrNotRegular},
		{"missing", func(*testing.T, string) {}, 64, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			tc.plant(t, p)
			done := make(chan struct{})
			var b []byte
			var err error
			go func() {
				defer close(done)
				b, err = Read(p, tc.max)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("Read blocked")
			}
			if tc.wantErr == nil {
				if err != nil || string(b) != secretish {
					t.Fatalf("Read: %q %v", b, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Read: %q %v, want %v", b, err, tc.wantErr)
			}
			if strings.Contains(err.Error(), secretish) {
				t.Fatalf("the error holds the content: %v", err)
			}
		})
	}
}

// CheckDir refuses a directory others could write (naming it, its mode
// and the fix) or a symlink to one, and takes one the group may read.
func TestCheckDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode fs.FileMode
		link bool
		want []string // in the error; nil: taken
	}{
		{"0700", 0o700, false, nil},
		{"0750 (group-readable)", 0o750, false, nil},
		{"0755", 0o755, false, nil},
		{"0777", 0o777, false, []string{"0777", "chmod 0750"}},
		{"1777 (sticky)", 0o777 | fs.ModeSticky, false, []string{"0777", "chmod 0750"}},
		{"0770", 0o770, false, []string{"0770", "chmod 0750"}},
		{"0702", 0o702, false, []string{"0702", "chmod 0700"}},
		{"0775", 0o775, false, []string{"0775", "chmod 0750"}},
		{"symlink to a 0700 directory", 0o700, true, []string{"symlink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "d")
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.Chmod(dir, tc.mode))
			if tc.link {
				must(t, os.Symlink(dir, dir+"-link"))
				dir += "-link"
			}
			err := CheckDir(dir)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckDir: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckDir took it")
			}
			msg := strings.ReplaceAll(err.Error(), base, "BASE")
			for _, w := range append(tc.want, "BASE/d") {
				if !strings.Contains(msg, w) {
					t.Errorf("CheckDir: %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// Load uses a good primary (and rewrites a backup that differs), restores
// a missing or unreadable primary from a good backup (keeping the
// unreadable one aside), reports which it used, and fails, naming both
// files, when no copy is good. Peek, before it, gives the same answer and
// leaves the directory as it was.
func TestRecordLoad(t *testing.T) {
	good, other := "good record", "older record"
	check := func(b []byte) error {
		if !bytes.HasSuffix(b, []byte("record")) {
			return errors.New("no record")
		}
		return nil
	}
	fifo := func(t *testing.T, p string) { must(t, syscall.Mkfifo(p, 0o600)) }
	for _, tc := range []struct {
		name         string
		primary, bak func(*testing.T, string) // nil: none
		from         Source
		want         string // the data; "" with None
		setAside     bool
		wantErr      []string // in the error
	}{
		{name: "none", from: None},
		{name: "good, no backup", primary: writeFile(good), from: Primary, want: good},
		{name: "good, backup differs", primary: writeFile(good), bak: writeFile(other), from: Primary, want: good},
		{name: "good, backup a fifo", primary: writeFile(good), bak: fifo, from: Primary, want: good},
		{name: "missing", bak: writeFile(good), from: Backup, want: good},
		{name: "corrupt", primary: writeFile(secretish), bak: writeFile(good), from: Backup, want: good, setAside: true},
		{name: "empty", primary: writeFile(""), bak: writeFile(good), from: Backup, want: good, setAside: true},
		{name: "fifo", primary: fifo, bak: writeFile(good), from: Backup, want: good, setAside: true},
		{name: "oversized", primary: writeFile(strings.Repeat("x", 100) + "record"), bak: writeFile(good), from: Backup, want: good, setAside: true},
		{name: "corrupt, no backup", primary: writeFile(secretish), wantErr: []string{"no record", "is missing"}},
		{name: "corrupt, backup corrupt", primary: writeFile(secretish), bak: writeFile(secretish), wantErr: []string{"no record", "unreadable too"}},
		{name: "missing, backup a fifo", bak: fifo, wantErr: []string{"is missing", "FIFO"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := Record{Path: filepath.Join(dir, "rec.json"), Max: 64, Check: check}
			if tc.primary != nil {
				tc.primary(t, r.Path)
			}
			if tc.bak != nil {
				tc.bak(t, r.BackupPath())
			}
			before := dirState(t, dir)
			pl, perr := r.Peek()
			if after := dirState(t, dir); after != before {
				t.Errorf("Peek wrote: the directory was\n%s\nand is\n%s", before, after)
			}
			l, err := r.Load()
			if (perr == nil) != (err == nil) || (err != nil && perr.Error() != err.Error()) ||
				pl.From != l.From || !bytes.Equal(pl.Data, l.Data) {
				t.Errorf("Peek: from %v %q (%v); Load: from %v %q (%v): want the same", pl.From, pl.Data, perr, l.From, l.Data, err)
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Load: %+v, want an error", l)
				}
				for _, w := range append(tc.wantErr, r.Path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Load: %v, want it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), secretish) {
					t.Errorf("the error holds the content: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if l.From != tc.from || string(l.Data) != tc.want {
				t.Fatalf("Load: from %v %q, want from %v %q", l.From, l.Data, tc.from, tc.want)
			}
			if tc.from == None {
				return
			}
			// Both copies hold the record now, as regular files.
			for _, p := range []string{r.Path, r.BackupPath()} {
				if b, err := Read(p, 64); err != nil || string(b) != tc.want {
					t.Errorf("%s after Load: %q %v, want %q", p, b, err, tc.want)
				}
			}
			if fi, err := os.Lstat(r.Path + ".corrupt"); tc.setAside != (err == nil) || (err == nil && l.SetAside != r.Path+".corrupt") {
				t.Errorf("set aside: %v %v (reported %q), want %t", fi, err, l.SetAside, tc.setAside)
			}
		})
	}
}

// Save writes both copies; a primary lost afterwards is restored from the
// backup; a record past the cap is not written.
func TestRecordSave(t *testing.T) {
	r := Record{Path: filepath.Join(t.TempDir(), "rec.json"), Max: 16}
	if err := r.Save([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := r.Save([]byte("second")); err != nil {
		t.Fatal(err)
	}
	if err := r.Save(bytes.Repeat([]byte("x"), 17)); err == nil {
		t.Fatal("a record past the cap was written")
	}
	must(t, os.Remove(r.Path))
	if l, err := r.Load(); err != nil || l.From != Backup || string(l.Data) != "second" {
		t.Fatalf("Load: %+v %v, want second from the backup", l, err)
	}
	// The backup fails: the primary is written, and Replaced says so.
	r.Fault = func(p, step string) error {
		if p == r.BackupPath() && step == StepWrite {
			return syscall.EIO
		}
		return nil
	}
	if err := r.Save([]byte("third")); err == nil || !Replaced(err) {
		t.Fatalf("Save with the backup failing: %v, want a Replaced error", err)
	}
	if b, _ := Read(r.Path, 16); string(b) != "third" {
		t.Fatalf("primary %q, want third", b)
	}
}

func writeFile(s string) func(*testing.T, string) {
	return func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte(s), 0o600)) }
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CheckDir refuses a directory another user owns (who could plant files
// in it whatever its mode), naming the chown that fixes it.
func TestCheckDirOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "d")
	must(t, os.Mkdir(dir, 0o700))
	must(t, os.Chown(dir, 12345, 12345))
	err := CheckDir(dir)
	if err == nil || !strings.Contains(err.Error(), "uid 12345") || !strings.Contains(err.Error(), "chown 0 "+dir) {
		t.Fatalf("CheckDir of a directory uid 12345 owns: %v, want it refused with the chown", err)
	}
}

// dirState lists dir's entries, each with its mode and content (a FIFO's
// none: it is not opened).
func dirState(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v", e.Name(), fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
	}
	return b.String()
}
