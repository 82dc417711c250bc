package chainview

import (
	"os"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

func load(t *testing.T) (*policy.Policy, *keystore.Snapshot) {
	t.Helper()
	data, err := os.ReadFile("testdata/keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := keystore.DecodeFile("testdata/keys.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snap.Zero)
	pdata, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("testdata/policy.yaml", pdata)
	if err != nil {
		t.Fatal(err)
	}
	return pol, snap
}

func day(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Per chain, the key sent with now, the next one and from when, as Junos'
// show security keychain gives them.
func TestChains(t *testing.T) {
	pol, snap := load(t)
	name := func(k *control.ChainKey) string {
		if k == nil {
			return ""
		}
		return k.Name
	}
	for _, tc := range []struct {
		at             string
		chain          string
		sending, next  string
		nextAt         string // "" for none
		keys, bindings int
	}{
		{"2026-10-15T00:00:00Z", "core", "2026-10", "2026-11", "2026-11-01T00:00:00Z", 1, 2},
		// The accept window of 2026-11 opens a day early: a change of the
		// installed keys, not of the key sent with.
		{"2026-10-31T12:00:00Z", "core", "2026-10", "2026-11", "2026-11-01T00:00:00Z", 2, 2},
		{"2026-11-15T00:00:00Z", "core", "2026-11", "2026-12", "2026-12-01T00:00:00Z", 1, 2},
		{"2027-01-01T00:00:00Z", "core", "2026-12", "", "", 1, 2},
		// Nothing to send with from December on: no next key, the time.
		{"2026-11-15T00:00:00Z", "edge", "only", "", "2026-12-01T00:00:00Z", 1, 1},
		{"2026-12-15T00:00:00Z", "edge", "", "", "", 0, 1},
	} {
		t.Run(tc.chain+"@"+tc.at, func(t *testing.T) {
			var got *control.ChainStatus
			cs := Chains(pol, snap, day(tc.at))
			for i := range cs {
				if cs[i].Chain == tc.chain {
					got = &cs[i]
				}
			}
			if got == nil || len(cs) != 2 || cs[0].Chain != "core" {
				t.Fatalf("chains %+v: want core then edge", cs)
			}
			var nextAt time.Time
			if tc.nextAt != "" {
				nextAt = day(tc.nextAt)
			}
			if name(got.Sending) != tc.sending || name(got.Next) != tc.next || !got.NextAt.Equal(nextAt) ||
				len(got.Keys) != tc.keys || got.Bindings != tc.bindings || got.Problem != "" {
				t.Errorf("got sending %q, next %q from %s, %d keys, %d bindings (%s); want %q, %q from %s, %d keys, %d bindings",
					name(got.Sending), name(got.Next), got.NextAt, len(got.Keys), got.Bindings, got.Problem,
					tc.sending, tc.next, nextAt, tc.keys, tc.bindings)
			}
		})
	}
}
