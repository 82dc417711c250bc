package policy

import (
	"slices"
	"testing"
	"time"
)

// IDsAhead: the chain's keys that may still be installed, due now or
// later; a key whose send and accept lifetimes have both ended is not.
func TestIDsAhead(t *testing.T) {
	p := mustParse(t, "version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 192.0.2.2\n    key_chain: core\n")
	snap := snapshot(chain("core",
		mkt("core", "old", 1, 1, life(-48*time.Hour, -24*time.Hour), life(-48*time.Hour, -23*time.Hour)),
		mkt("core", "now", 2, 2, from(-time.Hour), from(-time.Hour)),
		mkt("core", "next", 3, 4, from(24*time.Hour), from(24*time.Hour))))
	got, err := p.IDsAhead(snap, addr("192.0.2.2"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []KeyIDs{{2, 2}, {3, 4}}; !slices.Equal(got, want) {
		t.Fatalf("IDsAhead = %v, want %v", got, want)
	}
	if _, err := p.IDsAhead(snap, addr("192.0.2.9"), "", t0); err == nil {
		t.Fatal("IDsAhead of a peer without a binding: no error")
	}
}
