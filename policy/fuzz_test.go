package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics; a failure is a non-empty Problems in which
// every problem names the file and wraps a sentinel; a success is a policy
// whose bindings resolve and whose functions do not panic.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, name := range append(files, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(desiredPolicy))
	f.Add([]byte("key_chains: [{name: a, keys: [{name: k, lifetime: always}]}]\npeers: [{neighbor: 10.0.0.0/8, key_chain: a}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("key_chains: [{name: a}]\npeers: [{neighbor_interface: \"*\", key_chain: a}, {neighbor_interface: [swp1, swp2], vrf: red, key_chain: a}]\n"))
	sentinels := []error{ErrSyntax, ErrUnknownField, ErrMissingField, ErrInvalid, ErrDuplicate, ErrUnknownChain, ErrOverlap, ErrKeyLength, ErrAlgorithm, ErrMACLength}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty Problems", err, err)
			}
			for _, pr := range ps {
				if pr.File != "fuzz.yaml" || pr.Err == nil {
					t.Fatalf("problem %+v lacks file or error", pr)
				}
				known := false
				for _, s := range sentinels {
					known = known || errors.Is(pr, s)
				}
				if !known {
					t.Fatalf("problem %q wraps no sentinel", pr)
				}
			}
			return
		}
		for _, b := range p.Bindings() {
			if _, ok := p.Chain(b.KeyChain); !ok {
				t.Fatalf("binding %s names undefined chain %q", b, b.KeyChain)
			}
			got, err := p.BindingFor(b.Neighbor.Addr(), b.VRF)
			if err != nil || got.Neighbor != b.Neighbor || got.Field != b.Field {
				t.Fatalf("BindingFor(%s) = %v, %v; want %s", b, got, err, b.Field)
			}
			if _, err := p.Desired(snapshot(), b.Neighbor.Addr(), b.VRF, t0); !errors.Is(err, ErrUnknownChain) {
				t.Fatalf("Desired with an empty snapshot = %v", err)
			}
		}
		for _, b := range p.LinkBindings() {
			if _, ok := p.Chain(b.KeyChain); !ok || b.Neighbor.IsValid() || len(b.Interfaces) == 0 {
				t.Fatalf("interface binding %s: chain %q, neighbor %v", b, b.KeyChain, b.Neighbor)
			}
			for _, name := range b.Interfaces {
				got, err := p.BindingForLink(name, b.VRF)
				if err != nil || got.Field != b.Field {
					t.Fatalf("BindingForLink(%s, %q) = %v, %v; want %s", name, b.VRF, got, err, b.Field)
				}
			}
		}
		for _, c := range p.Chains() {
			if s, ok := p.Schedule(c.Name); ok {
				peer := addr("192.0.2.1")
				if nr := nextRotation(s, peer, t0); !nr.After(t0) && s.Interval > 0 {
					t.Fatalf("nextRotation(%v) = %v", t0, nr)
				}
			}
		}
		p.Validate(snapshot(), t0, 30*Day)
	})
}
