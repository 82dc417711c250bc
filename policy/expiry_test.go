package policy

import (
	"errors"
	"slices"
	"testing"
)

// TestOnKeyExpiry: safety.on_key_expiry parses (keep by default, remove,
// per binding), refuses other words naming the field, and with remove
// lists the keys whose send and accept lifetimes have both ended in
// PeerKeys.Expired (with keep, never).
func TestOnKeyExpiry(t *testing.T) {
	const d = Day
	snap := snapshot(chain("core",
		mkt("core", "k1", 1, 1, life(0, 10*d), life(0, 11*d)),
		mkt("core", "k2", 2, 2, from(10*d), from(9*d)),
	))
	for _, c := range []struct {
		name, yaml string
		want       ExpiryAction
		expired    []string // at 12 days: k1's lifetimes have ended
		at10       []string // at 10.5 days: k1 still accept-valid
	}{
		{"default keep", "", ExpiryKeep, nil, nil},
		{"remove", "safety: {on_key_expiry: remove}\n", ExpiryRemove, []string{"k1"}, nil},
		{"keep for the peer, remove elsewhere", "safety: {on_key_expiry: remove}\n", ExpiryKeep, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			peerSafety := ""
			if c.name == "keep for the peer, remove elsewhere" {
				peerSafety = ", safety: {on_key_expiry: keep}"
			}
			p := mustParse(t, c.yaml+"key_chains:\n  - name: core\npeers:\n  - {neighbor: 10.0.0.1, key_chain: core"+peerSafety+"}\n")
			pk, err := p.Desired(snap, addr("10.0.0.1"), "", at(12*d))
			if err != nil {
				t.Fatal(err)
			}
			if pk.Safety.OnKeyExpiry != c.want || !slices.Equal(pk.Expired, c.expired) {
				t.Errorf("on_key_expiry %q, expired %v; want %q, %v", pk.Safety.OnKeyExpiry, pk.Expired, c.want, c.expired)
			}
			pk, err = p.Desired(snap, addr("10.0.0.1"), "", at(10*d+12*60*60*1e9))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pk.Expired, c.at10) {
				t.Errorf("while k1 is accept-valid: expired %v", pk.Expired)
			}
		})
	}
	_, err := Parse("test.yaml", []byte("safety: {on_key_expiry: never}\nkey_chains: [{name: core}]\npeers: [{neighbor: 10.0.0.1, key_chain: core}]\n"))
	var ps Problems
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p *Problem) bool { return p.Field == "safety.on_key_expiry" }) {
		t.Errorf("on_key_expiry: never: %v, want ErrInvalid naming safety.on_key_expiry", err)
	}
}
