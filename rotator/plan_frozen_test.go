package rotator

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestPlanFrozen: the keys of a frozen binding (Desired.Frozen: its chain
// is degraded, or its keys cannot be computed) stay on the listener
// unless revoked, while they stay visible to the planner; keys outside
// the range (another prefix, another L3 device) are planned as usual.
func TestPlanFrozen(t *testing.T) {
	info := func(k tcpao.Key) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, MACLen: 12, Fingerprint: k.Secret.Fingerprint()}
	}
	inRange := mkKey("10.0.0.2/32", 1, 1, "frozen")
	wide := mkKey("10.0.0.0/24", 2, 2, "frozen-wide")
	outside := mkKey("10.9.0.2/32", 3, 3, "other")
	otherDev := mkKey("10.0.0.3/32", 4, 4, "vrf")
	otherDev.IfIndex = 7
	want := mkKey("10.9.0.2/32", 5, 5, "desired")
	obs := Observed{HaveAO: true, Keys: []tcpao.KeyInfo{info(inRange), info(wide), info(outside), info(otherDev)}}
	frozen := []KeyRange{{Prefix: netip.MustParsePrefix("10.0.0.0/24")}}
	for _, tc := range []struct {
		name    string
		frozen  []KeyRange
		revoked []tcpao.Key
		dels    []uint8 // SendIDs deleted
	}{
		{"not frozen: every undesired key goes", nil, nil, []uint8{1, 2, 3, 4}},
		{"frozen binding's keys stay", frozen, nil, []uint8{3, 4}},
		{"frozen on any device", []KeyRange{{Prefix: netip.MustParsePrefix("10.0.0.0/24"), AnyDevice: true}}, nil, []uint8{3}},
		{"a revoked key goes though frozen", frozen, []tcpao.Key{inRange}, []uint8{1, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Desired{Kind: Listening, Socket: "listen 0.0.0.0:179", Keys: []DesiredKey{dk(want)}, Frozen: tc.frozen, Revoked: revokedOf(tc.revoked...)}
			sp := PlanSocket(d, obs)
			var dels []uint8
			adds := 0
			for _, op := range sp.Ops {
				switch op.Kind {
				case OpDel:
					dels = append(dels, op.Ref().SendID)
				case OpAdd:
					adds++
				}
			}
			slices.Sort(dels)
			if !slices.Equal(dels, tc.dels) || adds != 1 {
				t.Fatalf("deletes %v and %d adds, want %v and 1:\n%v", dels, adds, tc.dels, sp.Ops)
			}
			if len(sp.Kept) != 0 || len(sp.Blocked) != 0 {
				t.Fatalf("kept %v blocked %v: a frozen key is neither", sp.Kept, sp.Blocked)
			}
		})
	}
}
