package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// AnyInterface in a binding's Interfaces binds every interface neighbour
// of its VRF (neighbor_interface: "*"): a fabric's links.
const AnyInterface = "*"

// LinkLocal is the prefix an interface neighbour's learned address is
// validated against: BGP unnumbered peers over IPv6 link-local addresses,
// learned from router advertisements, so an MKT restricted to peers
// applies to an interface binding when its peers overlap fe80::/10.
var LinkLocal = netip.MustParsePrefix("fe80::/10")

// ifaceNames is neighbor_interface in YAML: one interface name, "*", or a
// sequence of names. Each name is checked by the builder (peer.CheckLinkName),
// which places problems on their field.
type ifaceNames []string

func (l *ifaceNames) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = ifaceNames{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(ifaceNames, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return typeErr(c, "neighbor_interface: want interface names, have a %s in the list", kindName(c.Kind))
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return typeErr(n, "neighbor_interface: want an interface name, \"*\" or a list of names, have a %s", kindName(n.Kind))
}

// IsLink reports whether b binds interface neighbours (neighbor_interface)
// rather than neighbors by address.
func (b Binding) IsLink() bool { return len(b.Interfaces) > 0 }

// BindsLink reports whether b binds the interface neighbour on the
// interface named iface (in b's VRF: the caller compares VRFs).
func (b Binding) BindsLink(iface string) bool {
	return slices.Contains(b.Interfaces, AnyInterface) || slices.Contains(b.Interfaces, iface)
}

// linkBinding checks rp's neighbor_interface into bd; false when it is
// not usable (each problem recorded at its field).
func (b *builder) linkBinding(rp *rawPeer, bd *Binding, field string) bool {
	field += ".neighbor_interface"
	if rp.Neighbor != "" {
		b.addf(field, ErrInvalid, "a binding names its peers by neighbor or by neighbor_interface, not both; drop one (or write two bindings)")
		return false
	}
	names := *rp.NeighborInterface
	if len(names) == 0 {
		b.addf(field, ErrInvalid, "an empty list binds nothing; name interfaces, or \"*\" for every interface neighbour")
		return false
	}
	ok := true
	for i, name := range names {
		f := field
		if len(names) > 1 {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		switch {
		case name == AnyInterface && len(names) > 1:
			b.addf(f, ErrInvalid, "\"*\" binds every interface neighbour already; write it alone")
			ok = false
		case name == AnyInterface:
		case peer.CheckLinkName(name) != nil:
			b.addf(f, ErrInvalid, "%s: %v", keystore.Shown(name), peer.CheckLinkName(name))
			ok = false
		case slices.Index(names, name) < i:
			b.addf(f, ErrDuplicate, "interface %s is listed twice", keystore.Shown(name))
			ok = false
		}
	}
	bd.Interfaces = slices.Clone(names)
	return ok
}

// linkOverlap returns the first interface binding in bd's VRF that binds
// an interface bd binds too ("*" binds them all), nil when there is none.
func (p *Policy) linkOverlap(bd *Binding) *Binding {
	for _, o := range p.links {
		if o.VRF != bd.VRF {
			continue
		}
		for _, name := range bd.Interfaces {
			if o.BindsLink(name) || (name == AnyInterface && len(o.Interfaces) > 0) {
				return o
			}
		}
	}
	return nil
}

// LinkBindings returns the bindings of interface neighbours
// (neighbor_interface) in file order. Bindings, ForEachHost, BindingFor
// and HasPrefixBinding never see them: they bind no address.
func (p *Policy) LinkBindings() []Binding {
	out := make([]Binding, len(p.links))
	for i, b := range p.links {
		out[i] = *b
	}
	return out
}

// HasLinkBindings reports whether the policy binds interface neighbours.
func (p *Policy) HasLinkBindings() bool { return len(p.links) > 0 }

// BindingForLink returns the binding of the interface neighbour on the
// interface named iface in vrf: the one naming it, or the VRF's "*".
// Bindings never overlap, so there is at most one. It wraps ErrNoBinding
// when there is none.
func (p *Policy) BindingForLink(iface, vrf string) (Binding, error) {
	return p.BindingForKey(peer.OnLink(iface, vrf))
}

// linkString is an interface binding's text: "interface swp1",
// "interfaces swp1, swp2", "every interface".
func (b Binding) linkString() string {
	switch {
	case slices.Contains(b.Interfaces, AnyInterface):
		return "every interface"
	case len(b.Interfaces) == 1:
		return "interface " + b.Interfaces[0]
	}
	return "interfaces " + strings.Join(b.Interfaces, ", ")
}

// BindingForKey is the binding of the peer k names: BindingFor for an
// address, BindingForLink for an interface neighbour. It wraps
// ErrNoBinding when there is none.
func (p *Policy) BindingForKey(k peer.Key) (Binding, error) {
	b, err := p.BindingRefForKey(k)
	if err != nil {
		return Binding{}, err
	}
	return *b, nil
}

// BindingRefForKey is BindingForKey's binding itself (see BindingRef): it
// must not be modified.
func (p *Policy) BindingRefForKey(k peer.Key) (*Binding, error) {
	if !k.IsLink() {
		return p.bindingFor(k.Addr, k.VRF)
	}
	iface := k.Link.Name()
	for _, b := range p.links {
		if b.VRF == k.VRF && b.BindsLink(iface) {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: interface neighbour on %s in VRF %q", ErrNoBinding, iface, k.VRF)
}
