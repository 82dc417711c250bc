package keystore

import (
	"fmt"
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// RefusedAlgorithms returns one problem per key of s whose algorithm the
// kernel refuses: refused maps an algorithm to why (tcpao.ProbeAlgorithms;
// nil or absent: accepted), kernel names the kernel ("Linux 6.12.57").
// Each names the key's source, chain, key and the field algorithm, the
// kernel, and what to do. Sorted by chain and key.
func (s *Snapshot) RefusedAlgorithms(refused map[tcpao.Algorithm]error, kernel string) []error {
	if s == nil {
		return nil
	}
	var out []error
	names := make([]string, 0, len(s.Chains))
	for n := range s.Chains {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, m := range s.Chains[n].Keys {
			err := refused[m.Algorithm]
			if err == nil {
				continue
			}
			var ok []string
			for _, a := range tcpao.Algorithms {
				if refused[a] == nil {
					ok = append(ok, string(a))
				}
			}
			out = append(out, &FieldError{Pos: m.At, Chain: n, Key: m.Name, Field: join(m.Path, "algorithm"),
				Err: fmt.Errorf("%s: this machine's kernel (%s) refuses it (%w): give the chain a key of an algorithm it accepts (%v), or run a kernel whose crypto API has it", m.Algorithm, kernel, err, ok)})
		}
	}
	return out
}
