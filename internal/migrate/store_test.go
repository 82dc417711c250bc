package migrate

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
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
			r.Peer.VRF = "blue"
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

// TestOpenTodaysRecord: a migrations record as aokeyd wrote it before the
// peer was one field (its VRF in a field of its own) reads, peer by peer,
// and the next write keeps each peer in the one-field form, which reads
// back the same.
func TestOpenTodaysRecord(t *testing.T) {
	const today = `{
  "migrations": [
    {
      "peer": "10.0.0.2",
      "prefix": "10.0.0.0/30",
      "at": "2026-12-04T09:00:00Z",
      "bound": 300000000000,
      "step": "prepared",
      "since": "2026-12-04T08:50:00Z"
    },
    {
      "peer": "10.0.0.2",
      "vrf": "red",
      "prefix": "10.0.0.0/30",
      "at": "2026-12-04T09:00:00Z",
      "bound": 300000000000,
      "step": "rolled-back",
      "since": "2026-12-04T09:05:00Z",
      "reason": "no TCP-AO session"
    }
  ]
}
`
	path := filepath.Join(t.TempDir(), "migrations.json")
	if err := os.WriteFile(path, []byte(today), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		def, red := peer.KeyOf(netip.MustParseAddr("10.0.0.2"), ""), peer.KeyOf(netip.MustParseAddr("10.0.0.2"), "red")
		r, ok := s.Get(def)
		if !ok || r.Step != Prepared || r.Bound != 5*time.Minute || r.Prefix != netip.MustParsePrefix("10.0.0.0/30") {
			t.Fatalf("default VRF's record %+v, %v", r, ok)
		}
		r, ok = s.Get(red)
		if !ok || r.Step != RolledBack || r.Reason != "no TCP-AO session" || len(s.All()) != 2 {
			t.Fatalf("vrf red's record %+v, %v; %d records", r, ok, len(s.All()))
		}
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	r, _ := s.Get(peer.KeyOf(netip.MustParseAddr("10.0.0.2"), "red"))
	r.Since = r.Since.Add(time.Second)
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"peer": "10.0.0.2 vrf red"`) || strings.Contains(string(b), `"vrf"`) {
		t.Errorf("written as\n%s\nwant the peer in one field", b)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	check(s)
	for _, bad := range []string{
		`{"migrations":[{"peer":"10.0.0.2 vrf red","vrf":"blue","prefix":"10.0.0.0/30"}]}`,
		`{"migrations":[{"vrf":"red","prefix":"10.0.0.0/30"}]}`,
	} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(path + ".bak")
		if _, err := Open(path); err == nil {
			t.Errorf("Open read %s", bad)
		}
	}
}
