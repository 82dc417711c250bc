package main

import (
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/peerconfig"
	"github.com/aokeyd/aokeyd/internal/speakers"
)

// TestFarEndIsTheRegistrys: a target that is a kind of speaker aokeyd
// drives is rendered with that kind's capabilities from the registry
// (BIRD's key syntax has no MAC length and no option exclusion); any
// other target with none, its renderer deciding by its own syntax.
func TestFarEndIsTheRegistrys(t *testing.T) {
	for _, k := range config.SpeakerKinds {
		if _, err := peerconfig.ParseTarget(k.Name); err == nil && farEnd(peerconfig.Target(k.Name)) != k.Caps {
			t.Errorf("--for %s: far end %+v, want its registry entry's %+v", k.Name, farEnd(peerconfig.Target(k.Name)), k.Caps)
		}
	}
	if farEnd(peerconfig.BIRD) != config.BirdKind.Caps {
		t.Errorf("--for bird is not BIRD's entry")
	}
	if farEnd(peerconfig.Junos) != (speakers.Caps{}) {
		t.Errorf("--for junos has capabilities %+v", farEnd(peerconfig.Junos))
	}
}
