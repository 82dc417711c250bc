package policy

import (
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/speakers"
)

// CheckSpeaker refuses what a kind of speaker cannot hold, by its
// capabilities alone: a speaker that holds everything takes every binding;
// the most restrictive one (the zero Caps) refuses each kind of binding
// once, the VRF twins first, naming the kinds that would take them.
func TestCheckSpeakerReadsCaps(t *testing.T) {
	p := mustParse(t, `version: 1
key_chains:
  - name: c
peers:
  - {neighbor: 192.0.2.0/24, key_chain: c}
  - {neighbor: 192.0.2.9, vrf: red, key_chain: c}
  - {neighbor: 198.51.100.1, key_chain: c, include_tcp_options: false}
`)
	all := speakers.Kind{Name: "all", Title: "All", Caps: speakers.Caps{VRFs: true, SeparatesVRFs: true, PrefixBindings: true, ExcludesTCPOptions: true, SetsMACLength: true}}
	none := speakers.Kind{Name: "none", Title: "None"}
	if ps := p.CheckSpeaker(all, nil); len(ps) != 0 {
		t.Errorf("a speaker that holds everything: %v", ps)
	}
	ps := p.CheckSpeaker(none, []speakers.Kind{none, all})
	want := []string{
		"peers[1].vrf: invalid value: 192.0.2.9/32 is bound in vrf \"red\" and, at line 5, in vrf \"\": none keys its neighbors by address alone and cannot tell the two sessions apart; bind the address in one VRF, or run a speaker that separates VRFs (All)",
		"peers[0].neighbor: invalid value: 192.0.2.0/24 is a prefix: with speaker type none each neighbor's keys are its own; bind single addresses",
		"peers[1].vrf: invalid value: vrf \"red\": with speaker type none aokeyd keys default-VRF neighbors only",
		"peers[2].include_tcp_options: invalid value: None has no setting to exclude TCP options from the MAC: its keys always include them",
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems %q, want %d", len(ps), ps, len(want))
	}
	for i, w := range want {
		if !strings.Contains(ps[i].Error(), w) {
			t.Errorf("problem %d: %q, want it to say %q", i, ps[i], w)
		}
	}
}

// CheckSpeakerKeys refuses each bound key the speaker has no setting for,
// once per chain and key, with the binding's include_tcp_options applied;
// a speaker that holds every key refuses none.
func TestCheckSpeakerKeys(t *testing.T) {
	p := mustParse(t, `version: 1
key_chains:
  - name: c
  - name: d
peers:
  - {neighbor: 192.0.2.1, key_chain: c}
  - {neighbor: 192.0.2.2, key_chain: c}
  - {neighbor: 192.0.2.3, key_chain: d, include_tcp_options: false}
`)
	wide := mkt("c", "wide", 1, 101, from(0), from(0))
	wide.MACLen, wide.IncludeTCPOptions = 16, true
	plain := mkt("c", "plain", 2, 102, from(0), from(0))
	plain.IncludeTCPOptions = true
	d := mkt("d", "k", 3, 103, from(0), from(0))
	d.IncludeTCPOptions = true
	snap := snapshot(chain("c", wide, plain), chain("d", d))
	all := speakers.Kind{Name: "all", Title: "All", Caps: speakers.Caps{ExcludesTCPOptions: true, SetsMACLength: true}}
	if ps := p.CheckSpeakerKeys(all, snap, at(Day)); len(ps) != 0 {
		t.Errorf("a speaker that holds every key: %v", ps)
	}
	ps := p.CheckSpeakerKeys(speakers.Kind{Name: "none", Title: "None"}, snap, at(Day))
	want := []string{
		"None has no MAC length setting and uses the kernel's 12-byte default; this key's MAC is 16 bytes (speaker type none)",
		"None has no setting to exclude TCP options from the MAC (tcp_options: exclude): its keys always include them (speaker type none)",
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems %q, want %d", len(ps), ps, len(want))
	}
	for i, w := range want {
		if !strings.Contains(ps[i].Error(), w) {
			t.Errorf("problem %d: %q, want it to say %q", i, ps[i], w)
		}
	}
}
