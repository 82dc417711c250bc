package bgp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/policy"
)

// ErrMD5AndAO is the configuration error of a neighbor that the speaker
// protects with TCP-MD5 (auth-password) while the policy binds it to TCP-AO
// keys: the kernel rejects AO keys next to MD5 (EKEYREJECTED).
var ErrMD5AndAO = errors.New("neighbor has a TCP-MD5 auth-password in the BGP speaker and a TCP-AO binding in the policy; remove one (the kernel refuses TCP-AO next to TCP-MD5)")

// BindingFinder is what the inventory needs of the policy; *policy.Policy
// implements it.
type BindingFinder interface {
	BindingFor(peer netip.Addr, vrf string) (policy.Binding, error)
}

// Entry is one neighbor with its policy binding.
type Entry struct {
	Peer PeerInfo
	// Binding is the neighbor's TCP-AO binding, nil when the policy has
	// none (aokeyd leaves the neighbor alone).
	Binding *policy.Binding
	// Err is a configuration error: aokeyd does not touch this neighbor.
	Err error
	// Warnings are shown in aokeyd's status.
	Warnings []string
}

// Managed reports whether aokeyd manages keys for this neighbor.
func (e Entry) Managed() bool { return e.Binding != nil && e.Err == nil }

// WarnNotPassive is the status warning of an AO neighbor that the speaker
// may connect to actively (its outgoing connections cannot carry keys).
const WarnNotPassive = "TCP-AO neighbor is not passive-mode in the BGP speaker: its outgoing connections cannot carry TCP-AO keys (set passive-mode: true and let the peer connect)"

// Map ties each neighbor to its policy binding and reports configuration
// errors and warnings per neighbor.
func Map(peers []PeerInfo, bf BindingFinder) []Entry {
	out := make([]Entry, 0, len(peers))
	for _, p := range peers {
		e := Entry{Peer: p}
		b, err := bf.BindingFor(p.Neighbor, p.VRF)
		switch {
		case errors.Is(err, policy.ErrNoBinding):
		case err != nil:
			e.Err = fmt.Errorf("neighbor %s: policy binding: %w", p.Neighbor, err)
		default:
			e.Binding = &b
			if p.MD5 {
				e.Err = fmt.Errorf("neighbor %s (binding %s): %w", p.Neighbor, b, ErrMD5AndAO)
			}
			if !p.Passive {
				e.Warnings = append(e.Warnings, WarnNotPassive)
			}
		}
		out = append(out, e)
	}
	return out
}
