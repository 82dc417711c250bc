package policy

import (
	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// The raw* types mirror the YAML schema one to one. They are decoded with
// KnownFields(true), so an unknown field is an error with its line. Parse
// turns them into the checked types in policy.go.

type rawFile struct {
	Version   *int       `yaml:"version"`
	Defaults  rawDefault `yaml:"defaults"`
	Safety    rawSafety  `yaml:"safety"`
	KeyChains []rawChain `yaml:"key_chains"`
	Peers     []rawPeer  `yaml:"peers"`
}

type rawDefault struct {
	AcceptTolerance   *duration `yaml:"accept_tolerance"`
	AORequired        *bool     `yaml:"ao_required"`
	IncludeTCPOptions *bool     `yaml:"include_tcp_options"`
}

type rawSafety struct {
	SwitchTimeout   *duration `yaml:"switch_timeout"`
	OnSwitchTimeout *string   `yaml:"on_switch_timeout"`
	RetryAfter      *duration `yaml:"retry_after"`
	OnRevokeOnlyKey *string   `yaml:"on_revoke_only_key"`
	OnKeyExpiry     *string   `yaml:"on_key_expiry"`
}

type rawChain struct {
	Name            string       `yaml:"name"`
	SourceChain     string       `yaml:"source_chain"`
	AcceptTolerance *duration    `yaml:"accept_tolerance"`
	Keys            []rawKey     `yaml:"keys"`
	Rotation        *rawRotation `yaml:"rotation"`
}

type rawKey struct {
	Name           string    `yaml:"name"`
	Lifetime       *lifetime `yaml:"lifetime"`
	SendLifetime   *lifetime `yaml:"send_lifetime"`
	AcceptLifetime *lifetime `yaml:"accept_lifetime"`
}

type rawRotation struct {
	Start     *timestamp `yaml:"start"`
	Interval  *duration  `yaml:"interval"`
	Lead      *duration  `yaml:"lead"`
	Grace     *duration  `yaml:"grace"`
	Jitter    *duration  `yaml:"jitter"`
	Algorithm *string    `yaml:"algorithm"`
	KeyLength *int       `yaml:"key_length"`
	MACLength *int       `yaml:"mac_length"`
}

type rawPeer struct {
	Neighbor          string      `yaml:"neighbor"`
	NeighborInterface *ifaceNames `yaml:"neighbor_interface"`
	VRF               string      `yaml:"vrf"`
	KeyChain          string      `yaml:"key_chain"`
	IncludeTCPOptions *bool       `yaml:"include_tcp_options"`
	AORequired        *bool       `yaml:"ao_required"`
	Safety            *rawSafety  `yaml:"safety"`
}

// lifetime is an RFC 8177 lifetime in YAML: the scalar "always", or a
// mapping with an optional start and at most one of end and duration.
type lifetime keystore.Lifetime

func (l *lifetime) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "always" {
			*l = lifetime(keystore.Always)
			return nil
		}
		return typeErr(n, "lifetime: want \"always\" or a mapping with start, end or duration, have %s", keystore.Shown(n.Value))
	}
	if n.Kind != yaml.MappingNode {
		return typeErr(n, "lifetime: want \"always\" or a mapping, have a %s", kindName(n.Kind))
	}
	var (
		out                  keystore.Lifetime
		dur                  duration
		endNode, durNode     *yaml.Node
		startNode, alwaysNod *yaml.Node
		errs                 []string
	)
	add := func(err error) {
		if te, ok := err.(*yaml.TypeError); ok {
			errs = append(errs, te.Errors...)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "start":
			var t timestamp
			if err := t.UnmarshalYAML(v); err != nil {
				add(err)
				continue
			}
			out.Start, startNode = timeOf(t), v
		case "end":
			var t timestamp
			if err := t.UnmarshalYAML(v); err != nil {
				add(err)
				continue
			}
			out.End, endNode = timeOf(t), v
		case "duration":
			if err := dur.UnmarshalYAML(v); err != nil {
				add(err)
				continue
			}
			durNode = v
		case "always":
			alwaysNod = v
			if v.Value != "true" {
				errs = append(errs, typeErr(v, "lifetime: always: only \"true\" is meaningful").(*yaml.TypeError).Errors...)
			}
		default:
			errs = append(errs, typeErr(k, "field %s not found in lifetime (want start, end, duration or always)", k.Value).(*yaml.TypeError).Errors...)
		}
	}
	switch {
	case alwaysNod != nil && (startNode != nil || endNode != nil || durNode != nil):
		add(typeErr(alwaysNod, "lifetime: always excludes start, end and duration"))
	case endNode != nil && durNode != nil:
		add(typeErr(durNode, "lifetime: give end or duration, not both"))
	case durNode != nil && startNode == nil:
		add(typeErr(durNode, "lifetime: duration needs a start"))
	case durNode != nil && dur == 0:
		add(typeErr(durNode, "lifetime: duration must be positive"))
	case durNode != nil:
		out.End = out.Start.Add(timeDur(dur))
	case startNode != nil && endNode != nil && !out.End.After(out.Start):
		add(typeErr(endNode, "lifetime: end %s is not after start %s", out.End.Format(rfc3339), out.Start.Format(rfc3339)))
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*l = lifetime(out)
	return nil
}
