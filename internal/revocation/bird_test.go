package revocation

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/testkit"
)

// birdRecord is a bird-revocations.json as the BIRD driver wrote it
// before it shared the daemon's record: the request's spelling of a
// scoped revoke's peer, a repeated revoke, and one whose peer it refused
// after it wrote it.
const birdRecord = `[
  {"chain": "core", "key": "k1", "at": "2026-11-30T12:00:00Z"},
  {"chain": "core", "key": "k2", "peer": "::ffff:192.0.2.2", "vrf": "red", "at": "2026-11-30T12:01:00Z"},
  {"chain": "core", "key": "k1", "at": "2026-11-30T12:02:00Z"},
  {"chain": "core", "key": "k3", "peer": "bogus", "at": "2026-11-30T12:03:00Z"},
  {"chain": "core", "key": "k0", "at": "2026-11-29T12:00:00Z"}
]`

// TestMergeBird: at start the revocations an older BIRD driver recorded
// in its own file are taken into the one record, each once, before that
// file and its backup are removed; the ones BIRD refused are not; the
// next start finds nothing more to merge, and a file found again (a crash
// after the merge, before the removal) adds nothing twice.
func TestMergeBird(t *testing.T) {
	dir := t.TempDir()
	path, bird := filepath.Join(dir, File), filepath.Join(dir, BirdFile)
	if err := os.WriteFile(path, []byte(`[{"chain":"core","key":"k0","at":"2026-11-28T12:00:00Z"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bird, bird + ".bak"} {
		if err := os.WriteFile(p, []byte(birdRecord), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	want := []Revocation{
		{Chain: "core", Key: "k0", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)},
		{Chain: "core", Key: "k1", At: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
		{Chain: "core", Key: "k2", Peer: peerRed, At: time.Date(2026, 11, 30, 12, 1, 0, 0, time.UTC)},
	}
	s, err := Open(path, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.List(); !equal(got, want) {
		t.Fatalf("after the merge %v, want %v\n%s", got, want, logs.String())
	}
	for _, p := range []string{bird, bird + ".bak"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the merge: %v, want it removed", p, err)
		}
	}
	if !strings.Contains(logs.String(), "bogus") || !strings.Contains(logs.String(), "merged=2") {
		t.Errorf("log %s, want the merge (2 revocations) and the entry never in force named", logs.String())
	}
	// The one record holds them: a start reads them from it alone.
	if s, err = Open(path, nil); err != nil || !equal(s.List(), want) {
		t.Fatalf("the next start: %v, %v", s.List(), err)
	}
	// A crash after the merge, before the removal: merged again, adding
	// nothing.
	if err := os.WriteFile(bird, []byte(birdRecord), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, nil); err != nil || !equal(s.List(), want) {
		t.Fatalf("a start finding the merged file again: %v, %v", s.List(), err)
	}
	if _, err := os.Lstat(bird); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want it removed", bird, err)
	}
	// A BIRD driver still told to use its old file (as an older aokeyd's
	// wiring) reads and writes it alone.
	if s, err = Open(bird, nil); err != nil || s.Count() != 0 {
		t.Fatalf("Open(%s): %d revocations, %v", bird, s.Count(), err)
	}
}

// TestMergeBirdUnreadable: an older BIRD record that cannot be read
// (neither copy) refuses the start, naming it and what to do, and
// changes nothing; one whose backup is good is merged from the backup and
// the unreadable copy set aside; no record at all merges nothing.
func TestMergeBirdUnreadable(t *testing.T) {
	good := `[{"chain":"core","key":"k1","at":"2026-11-30T12:00:00Z"}]`
	for _, tc := range []struct {
		name        string
		record, bak testkit.Planter
		wantErr     string // "": opens
		want        int
	}{
		{name: "fifo", record: testkit.FIFO, wantErr: "FIFO"},
		{name: "corrupt", record: testkit.Content("[{"), wantErr: "restore it"},
		{name: "corrupt with backup", record: testkit.Content("[{"), bak: testkit.Content(good), want: 1},
		{name: "missing with backup", bak: testkit.Content(good), want: 1},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, bird := filepath.Join(dir, File), filepath.Join(dir, BirdFile)
			testkit.PlantRecord(t, bird, tc.record, tc.bak)
			var s *Store
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{bird, bird + ".bak"}, func() { s, err = Open(path, nil) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), bird) {
					t.Fatalf("Open: %v, want an error naming %s and saying %q", err, bird, tc.wantErr)
				}
				if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the refused start wrote %s (%v)", path, err)
				}
				return
			}
			if err != nil || s.Count() != tc.want {
				t.Fatalf("Open: %v, %d revocations, want %d", err, s.Count(), tc.want)
			}
			if tc.record != nil {
				if _, err := os.Lstat(bird + ".corrupt"); err != nil {
					t.Errorf("the unreadable copy is not set aside: %v", err)
				}
			}
		})
	}
}

// TestMergeBirdWriteFails: a merge that cannot be recorded refuses the
// start and changes nothing: the older file stays, to be merged at the
// next start.
func TestMergeBirdWriteFails(t *testing.T) {
	dir := t.TempDir()
	path, bird := filepath.Join(dir, File), filepath.Join(dir, BirdFile)
	if err := os.WriteFile(bird, []byte(birdRecord), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenWith(path, Options{Fault: func(p, step string) error {
		if p == path && step == durable.StepWrite {
			return syscall.EIO
		}
		return nil
	}})
	if err == nil || !strings.Contains(err.Error(), bird) {
		t.Fatalf("Open: %v, want an error naming %s", err, bird)
	}
	if b, err := os.ReadFile(bird); err != nil || string(b) != birdRecord {
		t.Fatalf("%s after the failed merge: %v, want it as it was", bird, err)
	}
	if s, err := Open(path, nil); err != nil || s.Count() != 3 {
		t.Fatalf("the next start: %v", err)
	}
}
