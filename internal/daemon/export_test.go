package daemon

import (
	"log/slog"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// WriteOwnedRecord writes the ownership record at path of a previous run
// that installed keys on sockets of process pid.
func WriteOwnedRecord(path string, pid int, keys ...tcpao.Key) error {
	l, err := openLedger(path, nil, slog.New(slog.DiscardHandler), time.Now, nil)
	if err != nil {
		return err
	}
	for _, k := range keys {
		l.record(l.owner(pid).p, 0, k.KeyRef, k.Secret.Fingerprint(), false)
	}
	return l.close()
}

// SessionEvent asks for a pass as a session event does (a session taken
// over, up or down, a roll done): a listener sync without recompute.
func (d *Daemon) SessionEvent() { d.rec.resync() }
