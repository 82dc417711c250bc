package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestOwnedRecordFile: the ownership record is read only as a regular
// file (a FIFO at its name once blocked the start, a symlink was read
// through), and a record found unreadable at start is restored from its
// backup, owned-keys.json.bak.
func TestOwnedRecordFile(t *testing.T) {
	good := fmt.Sprintf(`{"version":1,"check":%q,"keys":[]}`, checkValue())
	fifo, write := testkit.FIFO, testkit.Content
	symlinkToGood := testkit.SymlinkTo(good)
	for _, tc := range []struct {
		name        string
		record, bak testkit.Planter // nil: no such file
		wantErr     string          // "": opens
		wantBoot    bool            // opens as an upgrade (no usable record)
	}{
		{name: "fifo", record: fifo, wantErr: "FIFO"},
		{name: "symlink to a good record", record: symlinkToGood, wantErr: "symlink"},
		{name: "corrupt", record: write("{"), wantErr: "backup"},
		{name: "fifo with backup", record: fifo, bak: write(good)},
		{name: "corrupt with backup", record: write("{"), bak: write(good)},
		{name: "missing with backup", bak: write(good)},
		{name: "none", wantBoot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "owned-keys.json")
			testkit.PlantRecord(t, path, tc.record, tc.bak)
			var l *ledger
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{path, path + ".bak"}, func() {
				l, err = openLedger(path, nil, slog.New(slog.DiscardHandler), time.Now, nil)
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir, "DIR"), tc.wantErr) {
					t.Fatalf("openLedger: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("openLedger: %v", err)
			}
			if l.bootstrap != tc.wantBoot {
				t.Errorf("bootstrap %t, want %t", l.bootstrap, tc.wantBoot)
			}
			if !tc.wantBoot {
				// The record is whole again, a regular file.
				if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("record after open: %v %v, want a regular file", fi, err)
				}
			}
		})
	}
}
