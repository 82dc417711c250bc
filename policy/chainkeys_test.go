package policy

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

func TestChainKeys(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	snap := desiredSnapshot()
	tests := []struct {
		name, peer, vrf string
		want            []string
		inc             bool
		wantErr         error
	}{
		// old is revoked, bad has an algorithm the kernel rejects, red is
		// another VRF's, sub another prefix's: none is rendered. Sorted
		// by send start (sub has none: first).
		{"all of the chain's keys, whatever their lifetimes", "10.0.0.1", "", []string{"k1", "k2"}, false, nil},
		{"policy key list and overrides", "10.0.0.2", "", []string{"k1", "k2"}, true, nil},
		{"restricted key of a prefix binding", "10.9.1.1", "blue", []string{"sub", "k1", "k2"}, false, nil},
		{"no binding", "192.0.2.1", "", nil, false, ErrNoBinding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, keys, err := p.ChainKeys(snap, addr(tt.peer), tt.vrf)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			var names []string
			for _, k := range keys {
				names = append(names, k.MKT.Name)
				if k.IncludeTCPOptions != tt.inc {
					t.Errorf("%s: include TCP options %t, want %t", k.MKT.Name, k.IncludeTCPOptions, tt.inc)
				}
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("keys %v, want %v", names, tt.want)
			}
		})
	}
	// The policy's lifetime override applies.
	_, keys, _ := p.ChainKeys(snap, addr("10.0.0.2"), "")
	if got := keys[0].SendLifetime; !got.End.Equal(at(10 * Day)) {
		t.Errorf("k1 send lifetime %s, want the policy's (end 2026-11-11)", got)
	}
}

func TestSendCoverageEnd(t *testing.T) {
	const d = Day
	key := func(l keystore.Lifetime) ScheduledKey { return ScheduledKey{SendLifetime: l} }
	never := time.Time{}
	tests := []struct {
		name string
		keys []ScheduledKey
		t    time.Duration
		want time.Time
	}{
		{"no key", nil, 0, at(0)},
		{"one key forever", []ScheduledKey{key(keystore.Always)}, 0, never},
		{"one key ending", []ScheduledKey{key(life(-d, 10*d))}, 0, at(10 * d)},
		{"successor overlaps", []ScheduledKey{key(life(-d, 10*d)), key(life(9*d, 20*d))}, 0, at(20 * d)},
		{"successor leaves a gap", []ScheduledKey{key(life(-d, 10*d)), key(life(11*d, 20*d))}, 0, at(10 * d)},
		{"successor forever", []ScheduledKey{key(from(5 * d)), key(life(-d, 10*d))}, 0, never},
		{"not yet covered", []ScheduledKey{key(from(5 * d))}, 0, at(0)},
		{"ends exactly at successor start", []ScheduledKey{key(life(-d, 10*d)), key(life(10*d, 30*d))}, 0, at(30 * d)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SendCoverageEnd(tt.keys, at(tt.t)); !got.Equal(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
