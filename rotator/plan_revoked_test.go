package rotator

import (
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestPlanRevokedMatchesMaterial: Desired.Revoked names a key by its
// reference and its material. An installed key in use under a revoked
// reference goes (a forced delete on an established socket) only when its
// material is the revoked key's; with other material (an operator's own
// key, material edited in place) it is not the revoked key and the
// never-strand rule keeps it like any other key in use.
func TestPlanRevokedMatchesMaterial(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	other := mkKey(peerA, 1, 1, "another alpha under a's IDs")
	for _, tc := range []struct {
		name    string
		listen  bool
		revoked tcpao.Key // the revoked key: a's reference, with its material
		deleted bool      // a leaves the socket
		many    bool      // the revoked list is long (a listener's is indexed)
	}{
		{name: "listener, a's material", listen: true, revoked: a, deleted: true},
		{name: "listener, other material", listen: true, revoked: other},
		{name: "listener, a's material, a long list", listen: true, revoked: a, deleted: true, many: true},
		{name: "listener, other material, a long list", listen: true, revoked: other, many: true},
		{name: "established, a's material", revoked: a, deleted: true},
		{name: "established, other material", revoked: other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *testSock
			d := Desired{Keys: []DesiredKey{dk(b)}, Revoked: revokedOf(tc.revoked)}
			if tc.many {
				d.Revoked = append(revokedUnder(linearMax+8, 9), d.Revoked...)
			}
			if tc.listen {
				s = newListener()
				setup(s.AddKey(a, tcpao.AddOptions{}))
				setup(s.AddKey(b, tcpao.AddOptions{}))
				d.Kind = Listening
			} else {
				// a is Current_key and RNext_key, b the peer was seen with.
				s = newEstablished(a, b)
				d.Kind, d.WantCurrent, d.WantRNext = Established, ID(2), ID(2)
			}
			obs := observe(t, s)
			if tc.listen {
				obs.Carried = []tcpao.KeyRef{a.KeyRef} // a session carries a: in use
			}
			sp := PlanSocket(d, obs)
			del := slices.ContainsFunc(sp.Ops, func(op Op) bool {
				return op.Kind == OpDel && op.Del.SendID == a.SendID && op.Why == ReasonRevoked
			})
			if del != tc.deleted {
				t.Fatalf("a deleted as revoked: %t, want %t; plan:\n%s", del, tc.deleted, strings.Join(opLines(sp), "\n"))
			}
			if _, err := Apply(s, sp.Ops); err != nil {
				t.Fatalf("apply: %v", err)
			}
			after := observe(t, s)
			has := slices.ContainsFunc(after.Keys, func(k tcpao.KeyInfo) bool {
				return k.SendID == a.SendID && k.Fingerprint == a.Secret.Fingerprint()
			})
			if has == tc.deleted {
				t.Errorf("a on the socket after the plan: %t, want %t", has, !tc.deleted)
			}
		})
	}
}
