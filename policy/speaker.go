package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
)

// CheckSpeaker reports the bindings the configured speaker cannot take,
// by what its kind can hold (k.Caps, from config's registry entry): one
// neighbor address bound in two VRFs, for a speaker that does not tell
// them apart; a prefix, for one that keys single neighbors only; a VRF,
// for one that keys the default VRF only; include_tcp_options: false, for
// one that always includes the options; neighbor_interface, for one that
// reports no interface neighbours. known are the kinds aokeyd
// drives, whose names a problem's fix offers. One Problem per binding and
// kind of problem, the VRF twins first.
func (p *Policy) CheckSpeaker(k speakers.Kind, known []speakers.Kind) []error {
	var out []error
	if !k.Caps.SeparatesVRFs {
		out = append(out, p.checkVRFTwins(k, known)...)
	}
	for _, b := range p.bindings {
		switch {
		case !k.Caps.PrefixBindings && !b.Neighbor.IsSingleIP():
			out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".neighbor", Err: fmt.Errorf(
				"%w: %s is a prefix: with speaker type %s each neighbor's keys are its own; bind single addresses", ErrInvalid, b.Neighbor, k.Name)})
		case !k.Caps.VRFs && b.VRF != "":
			out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".vrf", Err: fmt.Errorf(
				"%w: vrf %q: with speaker type %s aokeyd keys default-VRF neighbors only", ErrInvalid, b.VRF, k.Name)})
		case !k.Caps.ExcludesTCPOptions && b.IncludeTCPOptions != nil && !*b.IncludeTCPOptions:
			out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".include_tcp_options", Err: fmt.Errorf(
				"%w: %s has no setting to exclude TCP options from the MAC: its keys always include them", ErrInvalid, k.Title)})
		}
	}
	for _, b := range p.links {
		switch {
		case !k.Caps.InterfaceNeighbours:
			out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".neighbor_interface", Err: fmt.Errorf(
				"%w: %s: speaker type %s reports no interface neighbours; bind their addresses with neighbor", ErrInvalid, b.linkString(), k.Name)})
		case !k.Caps.VRFs && b.VRF != "":
			out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".vrf", Err: fmt.Errorf(
				"%w: vrf %q: with speaker type %s aokeyd keys default-VRF neighbors only", ErrInvalid, b.VRF, k.Name)})
		}
	}
	return out
}

// checkVRFTwins reports, for a speaker that keys its neighbors by address
// alone (gobgpd), each binding whose neighbor address another binding
// also binds in another VRF: such a speaker has one neighbor for both and
// aokeyd could not tell their sessions apart. One Problem per such binding
// after the first, naming both and the fix: one VRF, or a kind of known
// that separates VRFs.
func (p *Policy) checkVRFTwins(k speakers.Kind, known []speakers.Kind) []error {
	fix := "bind the address in one VRF"
	var separating []string
	for _, o := range known {
		if o.Caps.SeparatesVRFs {
			separating = append(separating, o.Title)
		}
	}
	if len(separating) > 0 {
		fix += ", or run a speaker that separates VRFs (" + strings.Join(separating, ", ") + ")"
	}
	var out []error
	for i, b := range p.bindings {
		for _, o := range p.bindings[:i] {
			if o.VRF != b.VRF && o.Neighbor.Overlaps(b.Neighbor) {
				out = append(out, &Problem{Pos: b.Pos, Field: b.Field + ".vrf", Err: fmt.Errorf(
					"%w: %s is bound in vrf %q and, at line %d, in vrf %q: %s keys its neighbors by address alone and cannot tell the two sessions apart; %s",
					ErrInvalid, b.Neighbor, b.VRF, o.Pos.Line, o.VRF, k.Name, fix)})
				break
			}
		}
	}
	return out
}

// CheckSpeakerKeys reports the bound keys the configured speaker cannot
// hold (k.KeyProblem: a MAC length or a TCP-option exclusion its kind has
// no setting for), each named by chain and key once, as the policy
// resolves them for its bindings at now.
func (p *Policy) CheckSpeakerKeys(k speakers.Kind, snap *keystore.Snapshot, now time.Time) []error {
	if k.Caps.ExcludesTCPOptions && k.Caps.SetsMACLength {
		return nil // it holds every key the kernel does
	}
	var out []error
	seen := map[string]bool{}
	for _, b := range p.bindings {
		pk, err := p.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err != nil {
			continue // Validate reports it
		}
		c := snap.Chains[pk.SourceChain]
		if c == nil {
			continue
		}
		for _, m := range c.Keys {
			inc := m.IncludeTCPOptions
			if b.IncludeTCPOptions != nil {
				inc = *b.IncludeTCPOptions
			}
			err := k.KeyProblem(m.MACLen, inc)
			if key := pk.SourceChain + "/" + m.Name; err != nil && !seen[key] {
				seen[key] = true
				out = append(out, &keystore.FieldError{Pos: m.At, Field: m.Path, Chain: pk.SourceChain, Key: m.Name,
					Err: fmt.Errorf("%w (speaker type %s)", err, k.Name)})
			}
		}
	}
	return out
}
