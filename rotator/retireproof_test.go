package rotator

import (
	"maps"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// infoOf is k as a full read of an established socket reports it.
func infoOf(k tcpao.Key, good uint64, cur, rnext bool) tcpao.KeyInfo {
	return tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, Fingerprint: k.Secret.Fingerprint(),
		PktGood: good, IsCurrent: cur, IsRNext: rnext}
}

// TestRetireProof: which deferred keys the retire step may name in
// Desired.Retire, and whether the proof holds, from one read and its base.
func TestRetireProof(t *testing.T) {
	a, b, c := mkKey("192.0.2.1/32", 1, 1, "a"), mkKey("192.0.2.1/32", 2, 2, "b"), mkKey("192.0.2.1/32", 3, 3, "c")
	want := Desired{Socket: "s", Kind: Established, Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}
	for _, tc := range []struct {
		name    string
		d       Desired
		keys    []tcpao.KeyInfo
		prev    GoodCounts
		retire  []uint8 // SendIDs
		used    bool
		rising  bool
		proven  bool // with the peer seen sending with the new key
		unknown bool // without it
	}{
		{name: "an old key the peer sent with, no longer rising: retired", d: want,
			keys: []tcpao.KeyInfo{infoOf(a, 40, false, false), infoOf(b, 9, true, true)}, prev: GoodCounts{a.KeyRef: 40},
			retire: []uint8{1}, used: true, proven: true},
		{name: "still rising: kept", d: want,
			keys: []tcpao.KeyInfo{infoOf(a, 41, false, false), infoOf(b, 9, true, true)}, prev: GoodCounts{a.KeyRef: 40},
			retire: []uint8{1}, used: true, rising: true},
		{name: "no base: a key the peer sent with counts as rising", d: want,
			keys: []tcpao.KeyInfo{infoOf(a, 40, false, false), infoOf(b, 9, true, true)}, prev: GoodCounts{},
			retire: []uint8{1}, used: true, rising: true},
		{name: "Current_key is deferred, never retired", d: want,
			keys: []tcpao.KeyInfo{infoOf(a, 40, true, false), infoOf(b, 9, false, true)}, prev: GoodCounts{a.KeyRef: 40},
			proven: true, unknown: true},
		{name: "a key the peer never sent with goes in any plan: nothing to prove", d: want,
			keys: []tcpao.KeyInfo{infoOf(c, 0, false, false), infoOf(b, 9, true, true)}, prev: GoodCounts{},
			proven: true, unknown: true},
		{name: "a revoked key the peer still sends with holds the proof", d: Desired{Socket: "s", Kind: Established,
			Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2), Revoked: revokedOf(c)},
			keys: []tcpao.KeyInfo{infoOf(c, 7, false, false), infoOf(b, 9, true, true)}, prev: GoodCounts{c.KeyRef: 5},
			used: true, rising: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Observed{HaveAO: true, Keys: tc.keys}
			base := maps.Clone(tc.prev)
			r := RetireProof(PlanSocket(tc.d, o), tc.prev, o)
			var got []uint8
			for _, ref := range r.Retire {
				got = append(got, ref.SendID)
			}
			if !slices.Equal(got, tc.retire) || r.Used != tc.used || r.Rising != tc.rising {
				t.Errorf("retire %v used %v rising %v, want %v %v %v", got, r.Used, r.Rising, tc.retire, tc.used, tc.rising)
			}
			if r.Proven(true) != tc.proven || r.Proven(false) != tc.unknown {
				t.Errorf("proven %v (unseen %v), want %v (%v)", r.Proven(true), r.Proven(false), tc.proven, tc.unknown)
			}
			if !maps.Equal(base, tc.prev) {
				t.Errorf("RetireProof changed its base: %v, was %v", tc.prev, base)
			}
		})
	}
}
