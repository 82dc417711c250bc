package kvv2

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/vault/api"
)

// GoneError is a path whose current version was deleted (vault kv delete)
// or destroyed (vault kv destroy): Vault keeps the version's number, and
// current_version, but serves no data for it. Path is as the reader names
// it in messages.
type GoneError struct {
	Path      string
	Version   int
	Destroyed bool
}

func (e *GoneError) Error() string {
	if e.Destroyed {
		return fmt.Sprintf("%s: its current version %d is destroyed; write a new version", e.Path, e.Version)
	}
	return fmt.Sprintf("%s: its current version %d is deleted; undelete it (vault kv undelete -versions=%d) or write a new version", e.Path, e.Version, e.Version)
}

// CurrentGone is the GoneError of the metadata md when its current version
// was deleted or destroyed, nil otherwise. A deletion_time still to come
// (delete_version_after) is not a deletion: now decides.
func CurrentGone(path string, md *api.KVMetadata, now time.Time) error {
	ver := md.CurrentVersion
	x, ok := md.Versions[strconv.Itoa(ver)]
	switch {
	case !ok:
		return nil
	case x.Destroyed:
		return &GoneError{Path: path, Version: ver, Destroyed: true}
	case !x.DeletionTime.IsZero() && !x.DeletionTime.After(now):
		return &GoneError{Path: path, Version: ver}
	}
	return nil
}

// GoneInRead is the GoneError of a data read that answered the version's
// metadata md and no data (a deleted or destroyed version); nil when md
// names no version.
func GoneInRead(path string, md map[string]any) error {
	n, ok := md["version"].(json.Number)
	if !ok {
		return nil
	}
	v, err := n.Int64()
	if err != nil || v <= 0 {
		return nil
	}
	destroyed, _ := md["destroyed"].(bool)
	return &GoneError{Path: path, Version: int(v), Destroyed: destroyed}
}
