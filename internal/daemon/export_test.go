package daemon

import "testing"

// MaxRecordBytes is the largest revocations record (or backup) read.
var MaxRecordBytes = int(maxRecordBytes)

// InjectWriteFault has every durable file write ask fault before each of
// its steps (create, write, fsync, rename, fsync-dir) for the rest of the
// test; a non-nil answer fails that step.
func InjectWriteFault(t testing.TB, fault func(path, step string) error) {
	writeFault = fault
	t.Cleanup(func() { writeFault = nil })
}
