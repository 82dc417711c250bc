package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A router's document keeps Go's duration text for its refresh and switch
// timeout: routers of every version read each other's documents from
// Vault (aoctl's own --json gives seconds, control.Duration).
func TestDocumentDurationsStayText(t *testing.T) {
	d := Document{Schema: Schema, RouterID: "r1", Refresh: Duration(30 * time.Second), SwitchTimeout: Duration(5 * time.Minute)}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"refresh":"30s"`, `"switch_timeout":"5m0s"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not hold %s", b, want)
		}
	}
	var back Document
	if err := json.Unmarshal(b, &back); err != nil || back.Refresh != d.Refresh || back.SwitchTimeout != d.SwitchTimeout {
		t.Errorf("read back %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"refresh":30}`), &back); err == nil {
		t.Error("a number of seconds read as a document's refresh: documents spell durations as text")
	}
}
