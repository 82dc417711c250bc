package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// KeyLifetime is a send or accept lifetime as a key-source document has it
// (docs/keys.md): "always" when both ends are open, else a map with the
// ends that are set, in RFC 3339 UTC.
func KeyLifetime(start, end time.Time) any {
	if start.IsZero() && end.IsZero() {
		return "always"
	}
	m := map[string]string{}
	if !start.IsZero() {
		m["start"] = start.UTC().Format(time.RFC3339Nano)
	}
	if !end.IsZero() {
		m["end"] = end.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// KeyList renders a socket's keys from aokeyd's status for a test's log:
// send/recv IDs, C for Current_key, R for RNext_key, and pkt_good, e.g.
// "[1/101C(good=12) 2/102R(good=0)]". Never any key material.
func KeyList(ks []control.Key) string {
	var s []string
	for _, k := range ks {
		f := ""
		if k.Current {
			f += "C"
		}
		if k.RNext {
			f += "R"
		}
		s = append(s, fmt.Sprintf("%d/%d%s(good=%d)", k.SendID, k.RecvID, f, k.PktGood))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// WriteKeyFile replaces dir's keys.yaml (a key-source document, JSON being
// YAML) with chains, atomically, as an operator's automation does:
// aokeyd's refresh never reads half a file.
func WriteKeyFile(t testing.TB, dir string, chains map[string]any) {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"chains": chains})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(p+".tmp", doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}
