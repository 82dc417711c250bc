package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestOpenFile: the migrations record is read only as a regular file (a
// FIFO at its name once blocked the start, a symlink was read through),
// and one found unreadable at start is restored from its backup,
// migrations.json.bak, which each write keeps.
func TestOpenFile(t *testing.T) {
	good := `{"migrations":[{"peer":"10.0.0.2","prefix":"10.0.0.0/30"}]}`
	fifo, write := testkit.FIFO, testkit.Content
	for _, tc := range []struct {
		name        string
		record, bak testkit.Planter // nil: no such file
		wantErr     string          // "": opens
		wantRecs    int
	}{
		{name: "fifo", record: fifo, wantErr: "FIFO"},
		{name: "symlink to a good record", record: testkit.SymlinkTo(good), wantErr: "symlink"},
		{name: "corrupt", record: write(`{"migrations":[`), wantErr: "backup"},
		{name: "fifo with backup", record: fifo, bak: write(good), wantRecs: 1},
		{name: "corrupt with backup", record: write(`{"migrations":[`), bak: write(good), wantRecs: 1},
		{name: "good", record: write(good), wantRecs: 1},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "migrations.json")
			testkit.PlantRecord(t, path, tc.record, tc.bak)
			var s *Store
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{path, path + ".bak"}, func() { s, err = Open(path) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir, "DIR"), tc.wantErr) {
					t.Fatalf("Open: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if n := len(s.All()); n != tc.wantRecs {
				t.Fatalf("%d records, want %d", n, tc.wantRecs)
			}
			if fromBackup := tc.bak != nil; (s.Restored() != "") != fromBackup {
				t.Errorf("Restored() %q, want it to say so: %t", s.Restored(), fromBackup)
			}
			if tc.wantRecs == 0 {
				return
			}
			// Each write keeps the backup; a record lost afterwards is
			// restored from it.
			r := s.All()[0]
			r.VRF = "blue"
			if err := s.Put(r); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			s, err = Open(path)
			if err != nil || len(s.All()) != 2 {
				t.Fatalf("reopened from the backup: %v, %d records, want 2", err, len(s.All()))
			}
		})
	}
}
