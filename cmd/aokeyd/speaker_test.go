package main

import (
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
)

// TestEveryKindOpens: every entry of the speaker registry is opened as its
// entry says: a kind that keys its own sockets by an executor, any other
// as a Speaker, and by exactly one of them.
func TestEveryKindOpens(t *testing.T) {
	for _, k := range config.SpeakerKinds {
		_, speaker := speakerOpeners[k]
		_, exec := executors[k]
		if speaker == exec || speaker != (k.Opens() == config.OpensSpeaker) {
			t.Errorf("%s opens as %v: opener %t, executor %t", k.Name, k.Opens(), speaker, exec)
		}
	}
	if len(speakerOpeners)+len(executors) != len(config.SpeakerKinds) {
		t.Errorf("%d openers and %d executors for %d kinds", len(speakerOpeners), len(executors), len(config.SpeakerKinds))
	}
}
