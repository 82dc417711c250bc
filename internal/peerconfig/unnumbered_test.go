package peerconfig

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/speakers"
)

// TestUnnumbered: the far end of an interface neighbour (issue 53) peers
// with aokeyd's router on its own interface over link-local addresses:
// BIRD names it `neighbor ADDR % "IFACE"`, a second aokeyd binds it by
// neighbor_interface beside FRR's `neighbor IFACE interface`, placeholders
// standing for what is not known; the other targets refuse the chain
// whole rather than render a neighbor by an address that changes.
func TestUnnumbered(t *testing.T) {
	_, l := fixture(t)
	l.Unnumbered, l.Local = true, ""
	all := speakers.Caps{ExcludesTCPOptions: true, SetsMACLength: true}
	for _, tc := range []struct {
		target    Target
		iface     string
		says, not []string
	}{
		{BIRD, "eth1", []string{"Inside `protocol bgp` for neighbor <aokeyd-router-link-local-address> % \"eth1\":", "authentication ao;"}, nil},
		{BIRD, "", []string{`neighbor <aokeyd-router-link-local-address> % "<far-end-interface>":`}, nil},
		{Aokeyd, "swp2", []string{`peers: ["fe80::/64"]`, "#   - neighbor_interface: swp2", "#  neighbor swp2 interface remote-as <asn>", "# speaker: {type: frr}"},
			[]string{"#   - neighbor: "}},
	} {
		l.Interface = tc.iface
		var b bytes.Buffer
		refused, err := Render(&b, tc.target, l, Options{At: at, FarEnd: all})
		if err != nil || len(refused) != 0 {
			t.Fatalf("%s: refused %v, %v", tc.target, refused, err)
		}
		for _, s := range tc.says {
			if !strings.Contains(b.String(), s) {
				t.Errorf("%s (interface %q) does not say %q:\n%s", tc.target, tc.iface, s, b.String())
			}
		}
		for _, s := range tc.not {
			if strings.Contains(b.String(), s) {
				t.Errorf("%s says %q:\n%s", tc.target, s, b.String())
			}
		}
	}
	l.Local, l.Interface = "fe80::a", ""
	var b bytes.Buffer
	if _, err := Render(&b, BIRD, l, Options{At: at, FarEnd: all}); err != nil || !strings.Contains(b.String(), `for neighbor fe80::a % "<far-end-interface>":`) {
		t.Errorf("--local fe80::a: %v\n%s", err, b.String())
	}
	for _, tgt := range []Target{Junos, IOSXR, EOS, GoBGP, YANG} {
		var b bytes.Buffer
		refused, err := Render(&b, tgt, l, Options{At: at})
		if err != nil || len(refused) != 1 || refused[0].Key != "" || !strings.Contains(refused[0].Reason, "rendered for aokeyd") || b.Len() != 0 {
			t.Errorf("%s: refused %v, %v, output %q; want the chain refused whole, nothing written", tgt, refused, err, b.String())
		}
	}
}
