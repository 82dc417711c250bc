package testkit

import (
	"os"
	"syscall"
	"testing"
)

// Planter puts one copy of a record file at a path, as a test of a
// reader of aokeyd's records finds it (nil: no file there).
type Planter func(path string) error

// FIFO plants a FIFO: a reader that opens it blocking waits for ever.
func FIFO(path string) error { return syscall.Mkfifo(path, 0o600) }

// Content plants a regular file holding s.
func Content(s string) Planter {
	return func(p string) error { return os.WriteFile(p, []byte(s), 0o600) }
}

// SymlinkTo plants a symlink to a regular file beside it holding s (a good
// record read through a link is still refused).
func SymlinkTo(s string) Planter {
	return func(p string) error {
		if err := os.WriteFile(p+".real", []byte(s), 0o600); err != nil {
			return err
		}
		return os.Symlink(p+".real", p)
	}
}

// PlantRecord plants record at path and bak at its backup, path.bak.
func PlantRecord(t testing.TB, path string, record, bak Planter) {
	t.Helper()
	for p, plant := range map[string]Planter{path: record, path + ".bak": bak} {
		if plant != nil {
			if err := plant(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}
