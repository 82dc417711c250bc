package policy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
)

// TestLinkBindings: neighbor_interface binds interface neighbours (issue
// 53) by one name, a list, or "*" for every one of the VRF; they are
// kept apart from the bindings by address, whose users read addresses.
func TestLinkBindings(t *testing.T) {
	p := mustParse(t, `key_chains: [{name: fabric}, {name: edge}]
peers:
  - {neighbor_interface: "*", key_chain: fabric}
  - {neighbor_interface: swp9, vrf: red, key_chain: edge}
  - {neighbor_interface: [swp1, swp2], vrf: blue, key_chain: edge}
  - {neighbor: 10.0.0.1, key_chain: edge}
`)
	if bs := p.Bindings(); len(bs) != 1 || bs[0].Neighbor.String() != "10.0.0.1/32" {
		t.Fatalf("Bindings = %v, want the address binding alone", bs)
	}
	if p.HasPrefixBinding() {
		t.Error("an interface binding reads as a prefix binding")
	}
	ls := p.LinkBindings()
	var names []string
	for _, b := range ls {
		names = append(names, b.String())
		if b.Neighbor.IsValid() || !b.IsLink() {
			t.Errorf("%s: neighbor %v, link %t", b, b.Neighbor, b.IsLink())
		}
	}
	if want := []string{"every interface", "interface swp9 (vrf red)", "interfaces swp1, swp2 (vrf blue)"}; !slices.Equal(names, want) {
		t.Errorf("LinkBindings = %q, want %q", names, want)
	}
	for _, c := range []struct {
		iface, vrf, chain string
	}{
		{"swp1", "", "fabric"}, {"eth7", "", "fabric"}, {"swp9", "red", "edge"}, {"swp2", "blue", "edge"},
		{"swp1", "red", ""}, {"swp3", "blue", ""},
	} {
		b, err := p.BindingForLink(c.iface, c.vrf)
		switch {
		case c.chain == "" && !errors.Is(err, ErrNoBinding):
			t.Errorf("BindingForLink(%s, %q) = %v, %v; want ErrNoBinding", c.iface, c.vrf, b, err)
		case c.chain != "" && (err != nil || b.KeyChain != c.chain):
			t.Errorf("BindingForLink(%s, %q) = %v, %v; want chain %s", c.iface, c.vrf, b, err, c.chain)
		}
	}
	if _, err := p.BindingFor(addr("fe80::1"), ""); !errors.Is(err, ErrNoBinding) {
		t.Errorf("an address binding lookup found an interface binding: %v", err)
	}
	// BindingForKey answers both kinds of peer by its identity alone.
	for _, c := range []struct {
		k     peer.Key
		chain string
	}{
		{peer.OnLink("swp1", ""), "fabric"}, {peer.OnLink("swp9", "red"), "edge"},
		{peer.OnLink("swp1", "red"), ""}, {peer.KeyOf(addr("fe80::1"), ""), ""},
	} {
		b, err := p.BindingForKey(c.k)
		switch {
		case c.chain == "" && !errors.Is(err, ErrNoBinding):
			t.Errorf("BindingForKey(%s) = %v, %v; want ErrNoBinding", c.k, b, err)
		case c.chain != "" && (err != nil || b.KeyChain != c.chain):
			t.Errorf("BindingForKey(%s) = %v, %v; want chain %s", c.k, b, err, c.chain)
		}
	}
}

// TestLinkBindingProblems: each misuse of neighbor_interface is refused
// on its line and field, with the fix.
func TestLinkBindingProblems(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []wantProblem
	}{
		{"both", `
key_chains: [{name: a}]
peers:
  - {neighbor: 10.0.0.1, neighbor_interface: swp1, key_chain: a}
`, []wantProblem{{4, "peers[0].neighbor_interface", ErrInvalid, "by neighbor or by neighbor_interface, not both"}}},
		{"neither", `
key_chains: [{name: a}]
peers:
  - {key_chain: a}
`, []wantProblem{{4, "peers[0].neighbor", ErrMissingField, "neighbor: missing required field"}}},
		{"empty list", `
key_chains: [{name: a}]
peers:
  - {neighbor_interface: [], key_chain: a}
`, []wantProblem{{4, "peers[0].neighbor_interface", ErrInvalid, "an empty list binds nothing"}}},
		{"bad names", `
key_chains: [{name: a}]
peers:
  - key_chain: a
    neighbor_interface:
      - swp1
      - "*"
      - a-name-of-16-byt
      - "sw/p"
      - swp1
`, []wantProblem{
			{7, "peers[0].neighbor_interface[1]", ErrInvalid, `"*" binds every interface neighbour already; write it alone`},
			{8, "peers[0].neighbor_interface[2]", ErrInvalid, "not a valid interface name: 16 bytes, at most 15"},
			{9, "peers[0].neighbor_interface[3]", ErrInvalid, "not a valid interface name"},
			{10, "peers[0].neighbor_interface[4]", ErrDuplicate, `interface "swp1" is listed twice`},
		}},
		{"empty name", `
key_chains: [{name: a}]
peers:
  - {neighbor_interface: "", key_chain: a}
`, []wantProblem{{4, "peers[0].neighbor_interface", ErrInvalid, "not a valid interface name: empty"}}},
		{"overlaps", `
key_chains: [{name: a}]
peers:
  - {neighbor_interface: [swp1, swp2], key_chain: a}
  - {neighbor_interface: swp2, key_chain: a}
  - {neighbor_interface: "*", key_chain: a}
  - {neighbor_interface: "*", vrf: red, key_chain: a}
  - {neighbor_interface: swp2, vrf: blue, key_chain: a}
`, []wantProblem{
			{5, "peers[1].neighbor_interface", ErrOverlap, "interface swp2 overlaps interfaces swp1, swp2 of peers[0] (line 4) in the default VRF"},
			{6, "peers[2].neighbor_interface", ErrOverlap, "every interface overlaps interfaces swp1, swp2 of peers[0] (line 4)"},
		}},
		{"a mapping", `
key_chains: [{name: a}]
peers:
  - {neighbor_interface: {name: swp1}, key_chain: a}
`, []wantProblem{{4, "", ErrSyntax, "neighbor_interface: want an interface name, \"*\" or a list of names, have a mapping"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.src))
			checkProblems(t, err, "bad.yaml", tt.want)
		})
	}
}

// TestLinkBindingSpeaker: a speaker that reports no interface neighbours
// refuses a binding of them; FRR's capabilities take it.
func TestLinkBindingSpeaker(t *testing.T) {
	p := mustParse(t, "key_chains: [{name: c}]\npeers: [{neighbor_interface: \"*\", vrf: red, key_chain: c}]\n")
	if ps := p.CheckSpeaker(speakers.Kind{Name: "frr", Caps: speakers.Caps{VRFs: true, InterfaceNeighbours: true}}, nil); len(ps) != 0 {
		t.Errorf("a speaker with interface neighbours: %v", ps)
	}
	ps := p.CheckSpeaker(speakers.Kind{Name: "none"}, nil)
	if len(ps) != 1 || !strings.Contains(ps[0].Error(), `peers[0].neighbor_interface: invalid value: every interface: speaker type none reports no interface neighbours`) {
		t.Errorf("a speaker without interface neighbours: %q", ps)
	}
}

// TestValidateLinkBinding: an interface binding's keys are validated for
// the link-local addresses its neighbours learn: a chain whose keys are
// restricted to other peers leaves it without a key to send with.
func TestValidateLinkBinding(t *testing.T) {
	ll := mkt("fabric", "ll", 1, 1, keystore.Always, keystore.Always)
	ll.Peers = []netip.Prefix{netip.MustParsePrefix("fe80::/64")}
	other := mkt("other", "v4", 2, 2, keystore.Always, keystore.Always)
	other.Peers = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	p := mustParse(t, `key_chains: [{name: fabric}, {name: other}]
peers:
  - {neighbor_interface: "*", key_chain: fabric}
  - {neighbor_interface: swp1, vrf: red, key_chain: other}
`)
	ps := p.Validate(snapshot(chain("fabric", ll), chain("other", other)), t0, 24*time.Hour)
	if len(ps) != 1 || ps[0].Line != 4 || !errors.Is(ps[0], ErrGap) || !strings.Contains(ps[0].Error(), "peer interface swp1 (vrf red)") {
		t.Fatalf("Validate = %v, want the gap of the binding of swp1 alone", ps)
	}
}

// TestDesiredOnLink: an interface neighbour's keys are its interface
// binding's chain's that apply to the address it learned; nothing learned,
// or no binding of its interface, is an error, never another binding's
// keys.
func TestDesiredOnLink(t *testing.T) {
	ll := mkt("fabric", "ll", 1, 1, keystore.Always, keystore.Always)
	ll.Peers = []netip.Prefix{netip.MustParsePrefix("fe80::/64")}
	v4 := mkt("fabric", "v4", 2, 2, keystore.Always, keystore.Always)
	v4.Peers = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	any := mkt("fabric", "any", 3, 3, keystore.Always, keystore.Always)
	p := mustParse(t, `key_chains: [{name: fabric}, {name: addr}]
peers:
  - {neighbor_interface: [swp1, swp2], key_chain: fabric}
  - {neighbor: "fe80::/64", vrf: red, key_chain: addr}
`)
	snap := snapshot(chain("fabric", ll, v4, any))
	pk, err := p.DesiredOnLink(snap, "swp2", addr("fe80::b%swp2"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keyNames(pk); !slices.Equal(got, []string{"ll+", "any*"}) && !slices.Equal(got, []string{"ll*", "any+"}) {
		t.Errorf("keys %v, want ll and any", got)
	}
	if pk.Binding.String() != "interfaces swp1, swp2" || pk.Chain != "fabric" {
		t.Errorf("binding %s chain %s", pk.Binding, pk.Chain)
	}
	if _, err := p.DesiredOnLink(snap, "swp1", netip.Addr{}, "", t0); err == nil {
		t.Error("keys for a neighbour that learned no address")
	}
	if _, err := p.DesiredOnLink(snap, "swp3", addr("fe80::b"), "", t0); !errors.Is(err, ErrNoBinding) {
		t.Errorf("swp3, bound by no binding: %v, want ErrNoBinding", err)
	}
	if _, err := p.DesiredOnLink(snap, "swp1", addr("fe80::b"), "red", t0); !errors.Is(err, ErrNoBinding) {
		t.Errorf("swp1 in vrf red, whose address binding covers fe80::b: %v, want ErrNoBinding (the binding is not the link's)", err)
	}
	if _, err := p.DesiredOnLink(snapshot(), "swp1", addr("fe80::b"), "", t0); !errors.Is(err, ErrUnknownChain) {
		t.Errorf("an empty snapshot: %v, want ErrUnknownChain", err)
	}
}
