package bird

import (
	"errors"
	"testing"
)

func TestReconfigured(t *testing.T) {
	failed := errors.New("control socket closed")
	for _, c := range []struct {
		out    string
		err    error
		wantOK bool
	}{
		{"0003 Reconfigured\n", nil, true},
		{"0004 Reconfiguration in progress\n", nil, true},
		{"8002 bird.conf:12:3 syntax error\n", nil, false},
		{"", failed, false},
	} {
		err := Reconfigured(c.out, c.err)
		if (err == nil) != c.wantOK {
			t.Errorf("Reconfigured(%q, %v) = %v, want ok %v", c.out, c.err, err, c.wantOK)
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("Reconfigured(_, %v) = %v, want that error", c.err, err)
		}
	}
}
