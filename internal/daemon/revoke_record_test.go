package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

const tinyTmpfsEnv = "AOKEYD_TEST_TINY_TMPFS"

// inFullTmpfs runs the calling test again in a child process with its own
// mount namespace, where body gets a directory on a 4 KiB tmpfs that is
// already full. In the parent it waits for the child and reports its
// outcome. Needs root (the CI runs as root); skips otherwise.
func inFullTmpfs(t *testing.T, body func(dir string)) {
	if os.Getenv(tinyTmpfsEnv) == "" {
		if os.Getuid() != 0 {
			t.Skip("needs root to mount a tmpfs in a private mount namespace")
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(t.Name(), "/")
		for i, p := range parts {
			parts[i] = "^" + p + "$"
		}
		cmd := exec.Command(exe, "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), tinyTmpfsEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("no private mount namespace here: %v", err)
		}
		if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
			t.Skipf("the child skipped:\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
			t.Fatalf("child in a full tmpfs: %v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4k,mode=0700"); errors.Is(err, syscall.EPERM) {
		t.Skipf("mount tmpfs: %v", err)
	} else if err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 512))
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	body(filepath.Join(dir, "state"))
}

// A revoke whose record cannot be written fails before it touches any
// socket or the key source, is not applied by a later pass, and is not in
// force after a restart (its backup, never written, does not revive it).
func TestRevokeRecordWriteFails(t *testing.T) {
	run := func(t *testing.T, file string, restart bool, breakIt func(e *env) (repair func())) {
		synctest.Test(t, func(t *testing.T) {
			_, k1, k2, _ := testKeys()
			e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
			repair := breakIt(e)
			e.waitKeys("listener", e.lis, ids(k1, k2))
			e.up(ids(k1, k2), k2, k1)
			_, lisW := e.lisC.calls()
			_, accW := e.accC.calls()

			res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Fatalf("Revoke: %v, want an error naming %s", err, file)
			}
			if _, w := e.lisC.calls(); w != lisW || len(res.Sockets) != 0 {
				t.Errorf("the failed revoke wrote to the listener (%d writes, outcomes %+v)", w-lisW, res.Sockets)
			}
			if _, w := e.accC.calls(); w != accW {
				t.Errorf("the failed revoke wrote to the session (%d writes)", w-accW)
			}
			if c := e.src.revokeCalls(); len(c) != 0 {
				t.Errorf("the failed revoke wrote to the key source: %v", c)
			}
			// A full pass (k2's return to the listener proves it ran) must
			// not apply the revocation either.
			if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k2.mkt().Key(peerHost, 0).KeyRef}); err != nil {
				t.Fatal(err)
			}
			if err := e.d.RefreshKeys(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.waitKeys("listener after a full pass", e.lis, ids(k1, k2))
			if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k1, k2)) {
				t.Errorf("session keys %v after a full pass, want both", got)
			}
			if !restart {
				return
			}
			if repair != nil {
				repair()
			}
			e.stop()
			if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k2.mkt().Key(peerHost, 0).KeyRef}); err != nil {
				t.Fatal(err)
			}
			e.start(file)
			e.waitKeys("listener after a restart", e.lis, ids(k1, k2))
		})
	}
	t.Run("parent is a file", func(t *testing.T) {
		dir := t.TempDir()
		run(t, filepath.Join(dir, "state", "revocations.json"), false, func(*env) func() {
			if err := os.WriteFile(filepath.Join(dir, "state"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return nil
		})
	})
	t.Run("disk full", func(t *testing.T) {
		inFullTmpfs(t, func(dir string) {
			run(t, filepath.Join(dir, "revocations.json"), true, func(*env) func() { return nil })
		})
	})
	// Each step of the record's write failing (injected), the record's
	// directory fsync too, after which the record holds the revocation
	// until it is put back.
	for _, step := range []string{"create", "write", "fsync", "rename", "fsync-dir"} {
		t.Run("record "+step+" fails", func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "revocations.json")
			run(t, file, true, func(e *env) func() {
				failed := false
				e.injectWriteFault(func(path, s string) error {
					if path == file && s == step && !failed {
						failed = true
						return syscall.EIO
					}
					return nil
				})
				return func() { e.injectWriteFault(nil) }
			})
		})
	}
}

// A revoke whose backup write fails and whose record cannot be put back
// is recorded, so it is in force at once as after a restart: the revoke
// succeeds, with the record error in its result (Failed, so aoctl exits
// non-zero) and in status until the backup is written again (here by a
// second revoke of the same key); the next start finds the record whole.
func TestRevokeRecordDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, k2, _ := testKeys()
		file := filepath.Join(t.TempDir(), "revocations.json")
		e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
		e.waitKeys("listener", e.lis, ids(k1, k2))
		writes := map[string]int{}
		e.injectWriteFault(func(path, step string) error {
			if step == "create" {
				writes[path]++
			}
			if (path == file+".bak" && step == "write") || (path == file && writes[path] == 2 && step == "write") {
				return syscall.EIO
			}
			return nil
		})
		res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
		if err != nil {
			t.Fatalf("Revoke: %v, want it done: the record holds it", err)
		}
		if !strings.Contains(res.RecordError, file+".bak") || !res.Failed() {
			t.Errorf("result record error %q (failed %v), want one naming the backup, and the revoke marked failed", res.RecordError, res.Failed())
		}
		t.Logf("record error: %s", res.RecordError)
		e.waitKeys("listener", e.lis, ids(k2))
		warned := func() bool {
			rep, err := e.d.Status(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, file+".bak") })
		}
		if !warned() {
			t.Errorf("status warnings lack the backup left behind")
		}
		if b, err := os.ReadFile(file + ".bak"); err == nil && strings.Contains(string(b), `"k1"`) {
			t.Errorf("backup %q holds k1, want it behind", b)
		}

		e.injectWriteFault(nil)
		if res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name}); err != nil || res.RecordError != "" {
			t.Fatalf("revoking again: %v (record error %q), want the backup written", err, res.RecordError)
		}
		if warned() {
			t.Errorf("status still warns after the backup was written")
		}
		if b, err := os.ReadFile(file + ".bak"); err != nil || !strings.Contains(string(b), `"k1"`) {
			t.Errorf("backup %q %v, want it to hold k1", b, err)
		}
		e.stop()
		e.start(file)
		e.waitKeys("listener after a restart", e.lis, ids(k2))
	})
}

// newDaemon builds (does not run) a daemon over a one-key source with the
// revocations record at file.
func newDaemon(t *testing.T, file string, logs *testkit.SyncBuffer) (*daemon.Daemon, error) {
	_, k1, _, _ := testKeys()
	src := &fakeSource{}
	m := k1.mkt()
	defer m.Zero()
	src.setKeys(m)
	t.Cleanup(src.close)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	t.Cleanup(cache.Close)
	return daemon.New(daemon.Options{
		Policy: parsePolicy(t, fmt.Sprintf(basePolicy, "keep")), Keys: cache, Source: src,
		Speaker:    bgptest.NewSpeaker("fake-speaker", speakerPID, 16),
		Discoverer: newFakeDiscoverer(), RevocationsFile: file,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
}

// An unreadable record stops the start with an error naming the file and
// what to do, unless its backup is good: then the daemon starts with the
// backup and says so loudly. The record is read only as a regular file of
// bounded size: a symlink (dangling or not), a FIFO or a device is as
// unreadable as a truncated file, and so is `null`, which is no list.
func TestRevocationsRecordUnreadable(t *testing.T) {
	good := `[{"chain":"core","key":"k1","at":"2026-11-30T12:00:00Z"}]`
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o600) }
	symlinkTo := func(target string) func(string) error {
		return func(p string) error { return os.Symlink(target, p) }
	}
	// oversized is a valid list, padded with spaces past the size cap.
	oversized := func(p string) error {
		return os.WriteFile(p, append([]byte(good), bytes.Repeat([]byte(" "), revocation.MaxRecordBytes)...), 0o600)
	}
	for _, tc := range []struct {
		name        string
		record, bak *string // nil: no such file (unless a plant below)
		plant       func(path string) error
		plantBak    func(path string) error
		wantErr     bool
		wantLog     string
	}{
		{name: "zero length", record: ptr(""), wantErr: true},
		{name: "truncated", record: ptr(good[:20]), wantErr: true},
		{name: "not a list", record: ptr(`{"chain":"core"}`), wantErr: true},
		{name: "null", record: ptr("null"), wantErr: true},
		{name: "null with spaces", record: ptr(" null\n"), wantErr: true},
		{name: "bad peer", record: ptr(`[{"chain":"core","key":"k1","peer":"router-2"}]`), wantErr: true},
		{name: "vrf without peer", record: ptr(`[{"chain":"core","key":"k1","vrf":"blue"}]`), wantErr: true},
		{name: "fifo", plant: fifo, wantErr: true},
		{name: "symlink to /dev/zero", plant: symlinkTo("/dev/zero"), wantErr: true},
		{name: "symlink to a regular file", plant: func(p string) error {
			if err := os.WriteFile(p+".real", []byte(good), 0o600); err != nil {
				return err
			}
			return os.Symlink(p+".real", p)
		}, wantErr: true},
		{name: "dangling symlink", plant: symlinkTo("/nonexistent/revocations.json"), wantErr: true},
		{name: "oversized", plant: oversized, wantErr: true},
		{name: "record and backup bad", record: ptr(""), bak: ptr("[{"), wantErr: true},
		{name: "missing, backup null", bak: ptr("null"), wantErr: true},
		{name: "missing, backup a fifo", plantBak: fifo, wantErr: true},
		{name: "missing, backup a dangling symlink", plantBak: symlinkTo("/nonexistent"), wantErr: true},
		{name: "zero length with backup", record: ptr(""), bak: ptr(good), wantLog: "using its backup"},
		{name: "missing with backup", bak: ptr(good), wantLog: "using its backup"},
		{name: "null with backup", record: ptr("null"), bak: ptr(good), wantLog: "using its backup"},
		{name: "fifo with backup", plant: fifo, bak: ptr(good), wantLog: "using its backup"},
		{name: "dangling symlink with backup", plant: symlinkTo("/nonexistent"), bak: ptr(good), wantLog: "using its backup"},
		{name: "old format", record: ptr(good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "revocations.json")
			for p, s := range map[string]*string{file: tc.record, file + ".bak": tc.bak} {
				if s != nil {
					if err := os.WriteFile(p, []byte(*s), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			for p, plant := range map[string]func(string) error{file: tc.plant, file + ".bak": tc.plantBak} {
				if plant != nil {
					if err := plant(p); err != nil {
						t.Fatal(err)
					}
				}
			}
			planted, _ := os.Lstat(file)
			var logs testkit.SyncBuffer
			_, err := newDaemonWithin(t, file, &logs)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "restore") {
					t.Fatalf("New: %v, want a clear error naming %s and what to do", err, file)
				}
				t.Logf("start-up error: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log %q, want %q", logs.String(), tc.wantLog)
			}
			if planted != nil && tc.wantLog != "" {
				// The unreadable record is kept aside as it was (a
				// FIFO is not read: that would block).
				fi, err := os.Lstat(file + ".corrupt")
				if err != nil || fi.Mode().Type() != planted.Mode().Type() {
					t.Errorf("the unreadable record is not kept aside: %v %v, want a %v", fi, err, planted.Mode().Type())
				} else if tc.record != nil {
					if b, err := os.ReadFile(file + ".corrupt"); err != nil || string(b) != *tc.record {
						t.Errorf("the record kept aside holds %q %v, want %q", b, err, *tc.record)
					}
				}
			}
			synctest.Test(t, func(t *testing.T) {
				_, k1, k2, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
				// k1 stays revoked: it never reaches the listener.
				e.waitKeys("listener", e.lis, ids(k2))
				// The record is whole again, and a regular file.
				if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("record after start: %v %v, want a regular file", fi, err)
				} else if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"k1"`) {
					t.Errorf("record after start: %q %v, want it restored", b, err)
				}
			})
		})
	}
}

// newDaemonWithin is newDaemon under guard: a start-up that blocks (a
// FIFO opened for reading waits for a writer) fails the test after a
// deadline instead of hanging it, and one whose memory runs away (reading
// /dev/zero) stops the test binary before it hurts the machine. The
// deadline is real time: a goroutine blocked in open(2) or read(2) is not
// durably blocked, so a synctest bubble's clock would not move.
func newDaemonWithin(t *testing.T, file string, logs *testkit.SyncBuffer) (*daemon.Daemon, error) {
	t.Helper()
	type result struct {
		d   *daemon.Daemon
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := newDaemon(t, file, logs)
		done <- result{d, err}
	}()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.d, r.err
		case <-tick.C:
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base.HeapAlloc+1<<30 {
				panic(fmt.Sprintf("start-up with the revocations record %s has taken %d MiB and grows: it reads without a size limit",
					file, (m.HeapAlloc-base.HeapAlloc)>>20))
			}
		case <-deadline.C:
			// Let the blocked reader go (a writer that opens and closes
			// the FIFO gives it EOF) before failing.
			for range 100 {
				for _, p := range []string{file, file + ".bak"} {
					if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						f.Close()
					}
				}
				select {
				case <-done:
				case <-time.After(10 * time.Millisecond):
					continue
				}
				break
			}
			t.Fatalf("start-up with the revocations record %s still blocked after 10s: it waits on a FIFO", file)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// The temporary file of a record write is never a symlink planted in the
// state directory: the old fixed name revocations.json.tmp followed one.
func TestRevocationsTempSymlinkNotFollowed(t *testing.T) {
	synctest.Test(t, testRevocationsTempSymlinkNotFollowed)
}

func testRevocationsTempSymlinkNotFollowed(t *testing.T) {
	_, k1, k2, _ := testKeys()
	dir := t.TempDir()
	file := filepath.Join(dir, "revocations.json")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, file+".tmp"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name}); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("symlink target now %q (%v), want it untouched", b, err)
	}
	if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("record %s: %v %v, want a regular file", file, fi, err)
	}
}
