package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
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
// force after a restart.
func TestRevokeRecordWriteFails(t *testing.T) {
	run := func(t *testing.T, file string, restart bool, breakIt func()) {
		synctest.Test(t, func(t *testing.T) {
			_, k1, k2, _ := testKeys()
			e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
			breakIt()
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
		run(t, filepath.Join(dir, "state", "revocations.json"), false, func() {
			if err := os.WriteFile(filepath.Join(dir, "state"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("disk full", func(t *testing.T) {
		inFullTmpfs(t, func(dir string) { run(t, filepath.Join(dir, "revocations.json"), true, func() {}) })
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
// what to do, unless its backup (written before it, so never behind it)
// is good: then the daemon starts with the backup and says so loudly.
func TestRevocationsRecordUnreadable(t *testing.T) {
	good := `[{"chain":"core","key":"k1","at":"2026-11-30T12:00:00Z"}]`
	for _, tc := range []struct {
		name        string
		record, bak *string // nil: no such file
		wantErr     bool
		wantLog     string
	}{
		{name: "zero length", record: ptr(""), wantErr: true},
		{name: "truncated", record: ptr(good[:20]), wantErr: true},
		{name: "not a list", record: ptr(`{"chain":"core"}`), wantErr: true},
		{name: "bad peer", record: ptr(`[{"chain":"core","key":"k1","peer":"router-2"}]`), wantErr: true},
		{name: "vrf without peer", record: ptr(`[{"chain":"core","key":"k1","vrf":"blue"}]`), wantErr: true},
		{name: "record and backup bad", record: ptr(""), bak: ptr("[{"), wantErr: true},
		{name: "zero length with backup", record: ptr(""), bak: ptr(good), wantLog: "using its backup"},
		{name: "missing with backup", bak: ptr(good), wantLog: "using its backup"},
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
			if tc.wantErr {
				var logs testkit.SyncBuffer
				_, err := newDaemon(t, file, &logs)
				if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "restore") {
					t.Fatalf("New: %v, want a clear error naming %s and what to do", err, file)
				}
				t.Logf("start-up error: %v", err)
				return
			}
			synctest.Test(t, func(t *testing.T) {
				_, k1, k2, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
				// k1 stays revoked: it never reaches the listener.
				e.waitKeys("listener", e.lis, ids(k2))
				if tc.wantLog != "" && !strings.Contains(e.logs.String(), tc.wantLog) {
					t.Errorf("log %q, want %q", e.logs.String(), tc.wantLog)
				}
				if tc.record != nil && tc.wantLog != "" {
					if b, err := os.ReadFile(file + ".corrupt"); err != nil || string(b) != *tc.record {
						t.Errorf("the unreadable record is not kept aside: %q %v", b, err)
					}
				}
				// The record is whole again.
				if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"k1"`) {
					t.Errorf("record after start: %q %v, want it restored", b, err)
				}
			})
		})
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
