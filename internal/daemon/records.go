package daemon

import (
	"encoding/json"
	"log/slog"

	"github.com/aokeyd/aokeyd/internal/durable"
)

// maxOwnedBytes caps the ownership record (and its backup) read at start:
// a row is about 400 bytes, so this is over 150,000 recorded keys; a
// larger file is not one aokeyd wrote.
const maxOwnedBytes = 64 << 20

// ownedRecord is the ownership record at path in the shared record layer
// (durable.Record): read as a regular file only, capped, kept with a
// backup at path.bak that restores it when it is found unreadable.
func ownedRecord(path string, fault durable.Fault) durable.Record {
	return durable.Record{Path: path, Max: maxOwnedBytes, Fault: fault, Check: func(b []byte) error {
		var f ledgerFile
		return json.Unmarshal(b, &f)
	}}
}

// loadOwned reads the ownership record: nil data when there is none yet.
// A record restored from its backup is logged.
func loadOwned(path string, fault durable.Fault, log *slog.Logger) ([]byte, error) {
	l, err := ownedRecord(path, fault).Load()
	if err != nil {
		return nil, err
	}
	if l.From == durable.Backup {
		why := "is missing"
		if l.SetAside != "" {
			why = "is unreadable (" + l.PrimaryErr.Error() + "; kept as " + l.SetAside + ")"
		}
		log.Error("OWNERSHIP RECORD "+why+": using its backup (it lacks at most the keys recorded by its last write, "+
			"which look foreign: kept, never deleted); check the disk", "file", path, "backup", path+".bak")
	}
	if l.BackupWriteErr != nil {
		log.Warn("the ownership record's backup cannot be rewritten: the record is good; check the disk", "file", path, "err", l.BackupWriteErr)
	}
	return l.Data, nil
}
