package policy

import (
	"slices"
	"testing"
	"time"
)

// PeerKeys.Revoke takes one key out of a peer's answer and picks the
// preferred key again among the rest.
func TestPeerKeysRevoke(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	snap := desiredSnapshot()
	const d = Day
	tests := []struct {
		name      string
		at        int // days after t0
		revoke    string
		changed   bool
		keys      []string
		revoked   []string
		preferred string // "" for none
	}{
		{name: "the preferred key", at: 10, revoke: "k2", changed: true, keys: []string{"k1"}, revoked: []string{"old", "k2"}, preferred: "k1"},
		{name: "the other key", at: 10, revoke: "k1", changed: true, keys: []string{"k2"}, revoked: []string{"old", "k1"}, preferred: "k2"},
		{name: "the only key", at: 1, revoke: "k1", changed: true, keys: nil, revoked: []string{"old", "k1"}},
		{name: "not desired", at: 1, revoke: "k9", keys: []string{"k1"}, revoked: []string{"old"}, preferred: "k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk, err := p.Desired(snap, addr("10.0.0.1"), "", at(d*time.Duration(tt.at)))
			if err != nil {
				t.Fatal(err)
			}
			before := slices.Clone(pk.Keys)
			if got := pk.Revoke(tt.revoke); got != tt.changed {
				t.Errorf("Revoke = %t, want %t", got, tt.changed)
			}
			var names []string
			for _, k := range pk.Keys {
				names = append(names, k.MKT.Name)
			}
			if !slices.Equal(names, tt.keys) || !slices.Equal(pk.Revoked, tt.revoked) {
				t.Errorf("keys %v revoked %v, want %v and %v", names, pk.Revoked, tt.keys, tt.revoked)
			}
			k, ok := pk.PreferredKey()
			if ok != (tt.preferred != "") || (ok && k.MKT.Name != tt.preferred) {
				t.Errorf("preferred %v (%t), want %q", k.MKT.Name, ok, tt.preferred)
			}
			if tt.changed && len(before) == len(pk.Keys) {
				t.Errorf("the answer's key list was not shortened")
			}
		})
	}
}
