package policy

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
	"gopkg.in/yaml.v3"
)

// SwitchTimeoutAction is what to do when a peer is not seen sending with the
// new key within Safety.SwitchTimeout.
type SwitchTimeoutAction string

const (
	// SwitchRetry keeps sending with the old key and announces the new one
	// again every RetryAfter, for as long as the old key stays send-valid.
	SwitchRetry SwitchTimeoutAction = "retry"
	// SwitchAlert keeps sending with the old key, stops announcing the new
	// one and raises an alert.
	SwitchAlert SwitchTimeoutAction = "alert"
)

// RevokeAction is what to do when the only installed key of a peer is
// revoked and no other key is desired.
type RevokeAction string

const (
	// RevokeReset removes the key, which resets the BGP session: nothing can
	// be sent until a new key arrives.
	RevokeReset RevokeAction = "reset"
	// RevokeKeep leaves the revoked key installed and raises an alert, so the
	// session survives until the operator supplies a new key.
	RevokeKeep RevokeAction = "keep"
)

// ExpiryAction is what happens to a key whose lifetime ended while a
// session still uses it (or its peer last authenticated with it).
type ExpiryAction string

const (
	// ExpiryKeep keeps such a key on the session and the listener (the
	// never-strand rule), with a warning and an alert that fires at once:
	// the session and its next reconnect survive until the operator adds
	// a successor or revokes the key.
	ExpiryKeep ExpiryAction = "keep"
	// ExpiryRemove treats a key past its lifetime as revoked: it leaves
	// the listener at its end and each session where another key can
	// take over; a session whose only key it is keeps it until it drops,
	// and cannot come back with it. For operators who prefer a dropped
	// session to a key past its lifetime.
	ExpiryRemove ExpiryAction = "remove"
)

// Defaults of the optional settings.
const (
	DefaultSwitchTimeout   = 5 * time.Minute
	DefaultRetryAfter      = time.Minute
	DefaultOnSwitchTimeout = SwitchRetry
	DefaultOnRevokeOnlyKey = RevokeKeep
	DefaultOnKeyExpiry     = ExpiryKeep
	// DefaultAcceptTolerance is RFC 8177's accept-tolerance default.
	DefaultAcceptTolerance = time.Duration(0)
	// DefaultAORequired: managed peers reject segments without TCP-AO.
	DefaultAORequired = true
	// DefaultRotationAlgorithm and DefaultRotationKeyLength apply to
	// generated keys (KeyLength is 16 for cmac(aes128)).
	DefaultRotationAlgorithm = tcpao.HMACSHA256
	DefaultRotationKeyLength = 32
	// MaxMACLength is the longest MAC whose TCP-AO option still fits in a
	// SYN next to MSS, timestamps and window scaling (tcp_ao.c: 20 bytes of
	// option space, 4 of them TCP-AO's header).
	MaxMACLength = 16
)

// Safety holds the knobs that decide how cautious a rotation is.
type Safety struct {
	// SwitchTimeout is how long to wait for the peer to be seen sending with
	// the new key before OnSwitchTimeout applies.
	SwitchTimeout   time.Duration
	OnSwitchTimeout SwitchTimeoutAction
	// RetryAfter is the pause between announcements with SwitchRetry.
	RetryAfter      time.Duration
	OnRevokeOnlyKey RevokeAction
	// OnKeyExpiry: what a key's lifetime end does to a key still in use.
	OnKeyExpiry ExpiryAction
}

// DefaultSafety is the Safety of a policy that sets none.
func DefaultSafety() Safety {
	return Safety{
		SwitchTimeout:   DefaultSwitchTimeout,
		OnSwitchTimeout: DefaultOnSwitchTimeout,
		RetryAfter:      DefaultRetryAfter,
		OnRevokeOnlyKey: DefaultOnRevokeOnlyKey,
		OnKeyExpiry:     DefaultOnKeyExpiry,
	}
}

// KeyRef is one MKT a key chain lists, with optional lifetime overrides. A
// nil lifetime means the MKT's own (keystore.MKT.SendLifetime or
// AcceptLifetime).
type KeyRef struct {
	Name           string
	SendLifetime   *keystore.Lifetime
	AcceptLifetime *keystore.Lifetime
	Pos            Pos
	// Field is the YAML path, e.g. "key_chains[0].keys[1]".
	Field string
}

// Rotation is a generated-rotation schedule's configuration. See Schedule
// for the instants and lifetimes it yields.
type Rotation struct {
	// Start anchors the schedule: rotation 0 starts sending at Start (plus
	// the peer's jitter). Default: the Unix epoch.
	Start time.Time
	// Interval is the time between two rotations.
	Interval time.Duration
	// Lead is how long before its send start a new key is accepted.
	Lead time.Duration
	// Grace is how long after the next key's send start an old key stays
	// send- and accept-valid.
	Grace time.Duration
	// Jitter spreads the rotations of different peers over [0, Jitter).
	Jitter time.Duration
	// Algorithm, KeyLength and MACLength are what generated keys get.
	Algorithm tcpao.Algorithm
	KeyLength int
	MACLength uint8
}

// KeyChain is a policy key chain: a reference to a chain of the key source,
// optionally narrowed to listed MKTs, and optionally rotated by aokeyd.
type KeyChain struct {
	Name string
	// SourceChain is the name of the chain in the key source snapshot;
	// it defaults to Name.
	SourceChain string
	// AcceptTolerance widens every accept lifetime on both ends (clock skew).
	AcceptTolerance time.Duration
	// Keys lists the MKTs used; nil means every MKT of the source chain.
	Keys []KeyRef
	// Rotation is set when aokeyd generates the chain's keys.
	Rotation *Rotation
	Pos      Pos
	Field    string
}

// Binding ties a neighbor address or prefix in a VRF, or interface
// neighbours (Interfaces), to a key chain.
type Binding struct {
	// Neighbor is the peer's address as a host prefix (/32, /128) or a
	// prefix of peers (for listening sockets). Always masked, never a
	// 4-in-6 address. Invalid in an interface binding.
	Neighbor netip.Prefix
	// Interfaces are the interfaces of the interface neighbours it binds
	// (neighbor_interface: FRR's `neighbor swp1 interface`), each a valid
	// interface name, or AnyInterface alone; nil in a binding by address.
	// Exactly one of Neighbor and Interfaces is set.
	Interfaces []string
	// VRF is the L3 master device name, "" for the default VRF.
	VRF      string
	KeyChain string
	// IncludeTCPOptions overrides each MKT's own TCP option flag when set.
	IncludeTCPOptions *bool
	AORequired        bool
	Safety            Safety
	Pos               Pos
	Field             string
}

func (b Binding) String() string {
	s := b.Neighbor.String()
	if b.IsLink() {
		s = b.linkString()
	}
	if b.VRF == "" {
		return s
	}
	return s + " (vrf " + b.VRF + ")"
}

// Policy is a parsed, checked rotation policy. It is immutable and safe for
// concurrent use; values returned by its methods must not be modified.
type Policy struct {
	file string
	// text is the policy as parsed. A problem found later (Validate)
	// finds its line in it again (tree): the node tree yaml.v3 parses
	// costs about 1.1 KB a peer, which a daemon kept for its lifetime
	// (4.6 MB of a 4,096-peer policy in make bench's daemon item).
	text     []byte
	seed     []byte
	safety   Safety
	chains   []*KeyChain
	byName   map[string]*KeyChain
	bindings []*Binding
	// links are the interface bindings (neighbor_interface), apart: they
	// bind no address, and every user of bindings reads addresses.
	links []*Binding
	// index finds the binding of a peer; built with bindings.
	index bindingIndex
}

// tree parses the policy's text again into yaml.v3's node tree, for
// positions; nil if it does not parse (it did once).
func (p *Policy) tree() *yaml.Node {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(p.text)).Decode(&root); err != nil {
		return nil
	}
	return &root
}

// File is the name the policy was parsed under.
func (p *Policy) File() string { return p.file }

// Safety is the policy-wide safety setting; a binding may override it (see
// Binding.Safety).
func (p *Policy) Safety() Safety { return p.safety }

// Chains returns the key chains in file order.
func (p *Policy) Chains() []KeyChain {
	out := make([]KeyChain, len(p.chains))
	for i, c := range p.chains {
		out[i] = *c
	}
	return out
}

// Chain returns the key chain called name.
func (p *Policy) Chain(name string) (KeyChain, bool) {
	c, ok := p.byName[name]
	if !ok {
		return KeyChain{}, false
	}
	return *c, true
}

// Bindings returns the peer bindings in file order.
func (p *Policy) Bindings() []Binding {
	out := make([]Binding, len(p.bindings))
	for i, b := range p.bindings {
		out[i] = *b
	}
	return out
}

// ForEachHost calls f with the address and VRF of each binding of one
// peer (a host prefix), in file order, without copying the bindings.
func (p *Policy) ForEachHost(f func(addr netip.Addr, vrf string)) {
	for _, b := range p.bindings {
		if b.Neighbor.IsSingleIP() {
			f(b.Neighbor.Addr(), b.VRF)
		}
	}
}

// HasPrefixBinding reports whether a binding names a prefix of peers (for
// listening sockets) rather than one peer.
func (p *Policy) HasPrefixBinding() bool {
	for _, b := range p.bindings {
		if !b.Neighbor.IsSingleIP() {
			return true
		}
	}
	return false
}

// BindingFor returns the binding that covers peer in vrf ("" is the default
// VRF). Bindings never overlap, so there is at most one. It wraps
// ErrNoBinding when there is none.
func (p *Policy) BindingFor(peer netip.Addr, vrf string) (Binding, error) {
	b, err := p.bindingFor(peer, vrf)
	if err != nil {
		return Binding{}, err
	}
	return *b, nil
}

// BindingRef is BindingFor's binding itself, not a copy of it: shared
// with the policy and every other caller, it must not be modified. For
// one held per peer (the daemon's peer table: 8 bytes a peer, not 192).
func (p *Policy) BindingRef(peer netip.Addr, vrf string) (*Binding, error) {
	return p.bindingFor(peer, vrf)
}

func (p *Policy) bindingFor(peer netip.Addr, vrf string) (*Binding, error) {
	peer = peer.Unmap().WithZone("")
	if i, ok := p.index.lookup(peer, vrf); ok {
		return p.bindings[i], nil
	}
	return nil, fmt.Errorf("%w: peer %s in VRF %q", ErrNoBinding, peer, vrf)
}

// Schedule returns the rotation schedule of the key chain called chain, with
// the policy's jitter seed; false when the chain has no rotation.
func (p *Policy) Schedule(chain string) (Schedule, bool) {
	c, ok := p.byName[chain]
	if !ok || c.Rotation == nil {
		return Schedule{}, false
	}
	return NewSchedule(*c.Rotation, p.seed), true
}

// CheckVRFDevices returns a warning for each binding whose vrf: device
// says is not a VRF device here (device returns why, nil for a VRF):
// aokeyd keys a binding's sessions in its VRF only, so such a binding would
// never match one. They are warnings, not problems: the policy may be
// written for another machine, or the VRF created after it.
func (p *Policy) CheckVRFDevices(device func(vrf string) error) []error {
	var out []error
	var root *yaml.Node
	for _, b := range slices.Concat(p.bindings, p.links) {
		if b.VRF == "" {
			continue
		}
		if err := device(b.VRF); err != nil {
			if root == nil {
				root = p.tree()
			}
			out = append(out, &Problem{Pos: posOf(root, p.file, b.Field+".vrf"), Field: b.Field + ".vrf", Err: fmt.Errorf(
				"vrf %q: %w: the binding would never match a session; create the VRF (ip link add %s type vrf table N) or correct the name",
				b.VRF, err, b.VRF)})
		}
	}
	return out
}
