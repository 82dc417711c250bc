package rotator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// An OptID logs as the key ID people read in aoctl ("-" when not set),
// not as the struct encoding/json makes of it.
func TestOptIDLogValue(t *testing.T) {
	for _, c := range []struct {
		id   OptID
		want string
	}{{ID(2), `"current":2`}, {ID(0), `"current":0`}, {OptID{}, `"current":"-"`}} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("rotator: roll complete", "current", c.id)
		if !strings.Contains(buf.String(), c.want) {
			t.Errorf("%#v logs as %s, want %s", c.id, strings.TrimSpace(buf.String()), c.want)
		}
		if got := c.id.String(); got != strings.Trim(strings.TrimPrefix(c.want, `"current":`), `"`) {
			t.Errorf("%#v.String() = %q", c.id, got)
		}
	}
}
