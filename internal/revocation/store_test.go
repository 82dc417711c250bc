package revocation

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/testkit"
)

// fault fails the step of the nth durable write (from 1) of path.
type fault struct {
	bak  bool // the backup, not the record
	step string
	nth  int
}

// injectFaults has s's writes fail the steps faults name, counting the
// writes of each file from now on.
func injectFaults(s *Store, path string, faults ...fault) {
	writes := map[string]int{}
	s.fault = func(p, step string) error {
		if step == durable.StepCreate {
			writes[p]++
		}
		for _, f := range faults {
			want := path
			if f.bak {
				want += ".bak"
			}
			if p == want && step == f.step && writes[p] == f.nth {
				return syscall.EIO
			}
		}
		return nil
	}
}

// addOutcome adds r and says whether it is in force, and what failed.
func addOutcome(s *Store, r Revocation) (inForce bool, err error) {
	return s.Add(r)
}

// One outcome per revoke: whatever fails while a revocation is recorded,
// either add reports it in force (and it is in memory, in the record, and
// so after a restart), or add reports that nothing changed (and it is in
// none of them: not even the backup revives it at the next start). A
// record write that fails leaves the backup alone; a backup write that
// fails puts the record back; only when that too fails is the revocation
// in force (the record holds it), with an error saying the backup is
// behind.
func TestRevocationOneOutcome(t *testing.T) {
	prior := Revocation{Chain: "core", Key: "k0", At: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	r := Revocation{Chain: "core", Key: "k1", At: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name    string
		faults  []fault
		inForce bool
		wantErr bool
	}{
		{name: "no fault", inForce: true},
		{name: "record create fails", faults: []fault{{false, durable.StepCreate, 1}}, wantErr: true},
		{name: "record write fails", faults: []fault{{false, durable.StepWrite, 1}}, wantErr: true},
		{name: "record fsync fails", faults: []fault{{false, durable.StepSync, 1}}, wantErr: true},
		{name: "record rename fails", faults: []fault{{false, durable.StepRename, 1}}, wantErr: true},
		{name: "record replaced, its directory fsync fails", faults: []fault{{false, durable.StepSyncDir, 1}}, wantErr: true},
		{name: "backup write fails", faults: []fault{{true, durable.StepWrite, 1}}, wantErr: true},
		{name: "backup replaced, its directory fsync fails", faults: []fault{{true, durable.StepSyncDir, 1}}, wantErr: true},
		{name: "backup replaced and cannot be put back",
			faults: []fault{{true, durable.StepSyncDir, 1}, {true, durable.StepWrite, 2}}, wantErr: true},
		{name: "backup write fails, record cannot be put back",
			faults: []fault{{true, durable.StepWrite, 1}, {false, durable.StepWrite, 2}}, inForce: true, wantErr: true},
		{name: "record not durable, cannot be put back",
			faults: []fault{{false, durable.StepSyncDir, 1}, {false, durable.StepWrite, 2}}, inForce: true, wantErr: true},
	} {
		for _, first := range []bool{false, true} {
			name := tc.name + "/with a prior revocation"
			if first {
				name = tc.name + "/first revocation"
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "revocations.json")
				var logs bytes.Buffer
				log := slog.New(slog.NewTextHandler(&logs, nil))
				s, err := Open(path, log)
				if err != nil {
					t.Fatal(err)
				}
				var before []Revocation
				if !first {
					if ok, err := addOutcome(s, prior); !ok || err != nil {
						t.Fatalf("recording the prior revocation: %v %v", ok, err)
					}
					before = []Revocation{prior}
				}
				injectFaults(s, path, tc.faults...)
				inForce, err := addOutcome(s, r)
				s.fault = nil
				if inForce != tc.inForce || (err != nil) != tc.wantErr {
					t.Fatalf("add: in force %v, %v; want in force %v, an error %v", inForce, err, tc.inForce, tc.wantErr)
				}
				if err != nil {
					t.Logf("add: %v", err)
				}
				if err != nil && !strings.Contains(err.Error(), path) {
					t.Errorf("add: %v, want the error to name %s", err, path)
				}
				want := before
				if tc.inForce {
					want = append(slices.Clone(before), r)
				}
				if got := s.snapshotList(); !equal(got, want) {
					t.Errorf("in force now %v, want %v", got, want)
				}
				// The record on disk agrees...
				if got, err := readRecord(path); err != nil && !(first && !tc.inForce && errors.Is(err, os.ErrNotExist)) {
					t.Errorf("record after add: %v", err)
				} else if !equal(got, want) {
					t.Errorf("record after add holds %v, want %v", got, want)
				}
				// ... and so does the next start, whatever the backup holds.
				s2, err := Open(path, log)
				if err != nil {
					t.Fatalf("the next start: %v", err)
				}
				if got := s2.snapshotList(); !equal(got, want) {
					t.Errorf("in force after a restart %v, want %v\n%s", got, want, logs.String())
				}
				// That start left the backup equal to the record.
				if rec, err := os.ReadFile(path); err == nil {
					if bak, err := os.ReadFile(path + ".bak"); err != nil || !bytes.Equal(bak, rec) {
						t.Errorf("backup after the restart %q %v, want the record %q", bak, err, rec)
					}
				}
			})
		}
	}
}

func (s *Store) snapshotList() []Revocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// A revoke that would make the record larger than a start reads back
// fails and changes nothing, rather than write a record that would stop
// the next start.
func TestRevocationRecordFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.json")
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	s, err := Open(path, log)
	if err != nil {
		t.Fatal(err)
	}
	prior := Revocation{Chain: "core", Key: "k0"}
	if ok, err := s.Add(prior); !ok || err != nil {
		t.Fatal(ok, err)
	}
	s.max = int64(len(encodeRecord(s.list))) + 10
	inForce, err := s.Add(Revocation{Chain: "core", Key: "k1"})
	if inForce || err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("add past the size cap: in force %v, %v; want an error naming %s", inForce, err, path)
	}
	t.Logf("add: %v", err)
	s2, err := Open(path, log)
	if err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if got := s2.snapshotList(); !equal(got, []Revocation{prior}) {
		t.Errorf("after a restart %v, want the prior revocation alone", got)
	}
}

// readRecord reads one record file (durable.Record.ReadCopy): nil,
// fs.ErrNotExist when there is none, an error wrapping ErrBadRecord when
// it is not a regular file (a symlink, dangling or not, a FIFO, a
// device), is larger than MaxRecordBytes, empty, null or corrupt.
func readRecord(path string) ([]Revocation, error) {
	b, err := (&Store{path: path}).record().ReadCopy(path)
	if errors.Is(err, durable.ErrCorrupt) {
		return nil, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	if err != nil {
		return nil, err
	}
	return parseRecord(b)
}

// equal reports whether a and b are the same list, times included.
func equal(a, b []Revocation) bool {
	return slices.EqualFunc(a, b, func(x, y Revocation) bool { return x.Same(y) && x.At.Equal(y.At) })
}

// TestOpenNotRegular: the revocation record is read only as a regular
// file (a FIFO at the BIRD driver's record's name once blocked its start,
// a symlink was read through), and one found unreadable is restored from
// its backup.
func TestOpenNotRegular(t *testing.T) {
	good := `[{"chain":"core","key":"k1","at":"2026-11-30T12:00:00Z"}]`
	fifo, write := testkit.FIFO, testkit.Content
	for _, tc := range []struct {
		name        string
		record, bak testkit.Planter
		wantErr     string // "": loads
		want        int    // revocations loaded
	}{
		{name: "fifo", record: fifo, wantErr: "FIFO"},
		{name: "symlink to a good record", record: testkit.SymlinkTo(good), wantErr: "symlink"},
		{name: "corrupt", record: write("[{"), wantErr: "backup"},
		{name: "fifo with backup", record: fifo, bak: write(good), want: 1},
		{name: "corrupt with backup", record: write("[{"), bak: write(good), want: 1},
		{name: "good", record: write(good), want: 1},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, File)
			testkit.PlantRecord(t, path, tc.record, tc.bak)
			var s *Store
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{path, path + ".bak"}, func() { s, err = Open(path, nil) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir, "DIR"), tc.wantErr) {
					t.Fatalf("Open: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if n := s.Count(); n != tc.want {
				t.Fatalf("Open: %d revocations, want %d", n, tc.want)
			}
		})
	}
}
