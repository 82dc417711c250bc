package conformance

import (
	"testing"
)

func TestMemStack(t *testing.T) {
	if n := len(Cases()); n < 25 {
		t.Fatalf("table has %d cases, want at least 25", n)
	}
	Run(t, func(t *testing.T) Stack { return NewMemStack() })
}
