package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o600) }
	write := func(s string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(s), 0o600) }
	}
	symlinkToGood := func(p string) error {
		if err := os.WriteFile(p+".real", []byte(good), 0o600); err != nil {
			return err
		}
		return os.Symlink(p+".real", p)
	}
	for _, tc := range []struct {
		name        string
		record, bak func(string) error // nil: no such file
		wantErr     string             // "": opens
		wantBoot    bool               // opens as an upgrade (no usable record)
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
			for p, plant := range map[string]func(string) error{path: tc.record, path + ".bak": tc.bak} {
				if plant != nil {
					if err := plant(p); err != nil {
						t.Fatal(err)
					}
				}
			}
			var l *ledger
			var err error
			testkit.NoBlock(t, 5*time.Second, []string{path, path + ".bak"}, func() {
				l, err = openLedger(path, slog.New(slog.DiscardHandler), time.Now)
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
