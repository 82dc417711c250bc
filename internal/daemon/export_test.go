package daemon

import (
	"github.com/aokeyd/aokeyd/internal/durable"
	"log/slog"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// WriteOwnedRecord writes the ownership record at path of a previous run
// that installed keys on sockets of process pid.
func WriteOwnedRecord(path string, pid int, keys ...tcpao.Key) error {
	l, err := openLedger(path, slog.New(slog.DiscardHandler), time.Now, nil)
	if err != nil {
		return err
	}
	for _, k := range keys {
		l.record(l.owner(pid).p, 0, k.KeyRef, k.Secret.Fingerprint(), false)
	}
	return l.close()
}

// InjectWriteFault has every durable file write ask fault before each of
// its steps (create, write, fsync, rename, fsync-dir) for the rest of the
// test; a non-nil answer fails that step.
func InjectWriteFault(t testing.TB, fault func(path, step string) error) {
	old := durable.SetFault(fault)
	t.Cleanup(func() { durable.SetFault(old) })
}

// SessionEvent asks for a pass as a session event does (a session taken
// over, up or down, a roll done): a listener sync without recompute.
func (d *Daemon) SessionEvent() { d.rec.resync() }
