package peerconfig

import (
	"bytes"
	"testing"

	"github.com/aokeyd/aokeyd/internal/speakers"
)

// TestFarEndDecidesBIRDsRefusals: BIRD's refusals of a key are what the
// far end's capabilities say it cannot hold: with none declared (BIRD's
// own, and the zero value) the golden chain's key that excludes TCP
// options is refused; a far end that holds every key refuses none.
func TestFarEndDecidesBIRDsRefusals(t *testing.T) {
	_, l := fixture(t)
	for _, tt := range []struct {
		name    string
		farEnd  speakers.Caps
		refused int
	}{
		{"none declared", speakers.Caps{}, 1},
		{"every key held", speakers.Caps{ExcludesTCPOptions: true, SetsMACLength: true}, 0},
	} {
		refused, err := Render(&bytes.Buffer{}, BIRD, l, Options{At: at, FarEnd: tt.farEnd})
		if err != nil {
			t.Fatal(err)
		}
		if len(refused) != tt.refused {
			t.Errorf("%s: refused %+v, want %d", tt.name, refused, tt.refused)
		}
	}
}
