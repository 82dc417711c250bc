package keystore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Lifetime is an RFC 8177-style key lifetime (send-lifetime or
// accept-lifetime). The zero value is "always". A zero Start means "since
// forever", a zero End "for ever".
type Lifetime struct {
	Start time.Time
	End   time.Time
}

// Always is the lifetime that contains every instant.
var Always = Lifetime{}

// IsAlways reports whether l has neither start nor end.
func (l Lifetime) IsAlways() bool { return l.Start.IsZero() && l.End.IsZero() }

// Widen is l with each bounded end moved out by tol (an accept
// tolerance); an open end stays open.
func (l Lifetime) Widen(tol time.Duration) Lifetime {
	if !l.Start.IsZero() {
		l.Start = l.Start.Add(-tol)
	}
	if !l.End.IsZero() {
		l.End = l.End.Add(tol)
	}
	return l
}

// Contains reports whether t lies in [Start, End).
func (l Lifetime) Contains(t time.Time) bool {
	if !l.Start.IsZero() && t.Before(l.Start) {
		return false
	}
	if !l.End.IsZero() && !t.Before(l.End) {
		return false
	}
	return true
}

// Covers reports whether every instant of in is in l: a key's accept
// lifetime must cover its send lifetime, or the peer drops the segments
// the key signs outside it.
func (l Lifetime) Covers(in Lifetime) bool {
	if !l.Start.IsZero() && (in.Start.IsZero() || in.Start.Before(l.Start)) {
		return false
	}
	if !l.End.IsZero() && (in.End.IsZero() || in.End.After(l.End)) {
		return false
	}
	return true
}

func (l Lifetime) String() string {
	if l.IsAlways() {
		return "always"
	}
	s, e := "-", "-"
	if !l.Start.IsZero() {
		s = l.Start.UTC().Format(time.RFC3339)
	}
	if !l.End.IsZero() {
		e = l.End.UTC().Format(time.RFC3339)
	}
	return s + ".." + e
}

// MKT is one Master Key Tuple (RFC 5925 section 3.1) as an operator thinks of
// it.
//
// Orientation: an MKT is written from the point of view of the router that
// loads it. SendID is the KeyID this router puts in the segments it sends;
// RecvID is the KeyID it expects in segments it receives. The peer router
// holds the mirror image: its SendID is our RecvID and its RecvID is our
// SendID. Secret, algorithm, MAC length and TCP-option coverage must be equal
// on both sides.
type MKT struct {
	// Name identifies the MKT within its chain (e.g. "2026-11").
	Name string
	// Chain is the key chain the MKT belongs to.
	Chain  string
	SendID uint8
	RecvID uint8
	// Algorithm is the MAC algorithm.
	Algorithm tcpao.Algorithm
	// Secret is the traffic key's master key; 1..80 bytes (16 for
	// cmac(aes128)). It redacts itself when printed.
	Secret tcpao.Secret
	// MACLen is the MAC length in bytes (default 12).
	MACLen uint8
	// Peers are the neighbor addresses or prefixes the MKT applies to.
	Peers []netip.Prefix
	// VRF is the name of the L3 master device, "" for the default VRF.
	VRF string
	// IncludeTCPOptions is RFC 5925's TCP option flag; false sets
	// TCP_AO_KEYF_EXCLUDE_OPT.
	IncludeTCPOptions bool
	SendLifetime      Lifetime
	AcceptLifetime    Lifetime
	// Revoked marks a compromised key: it is removed everywhere and never
	// installed again.
	Revoked bool
	// Source says where the MKT was read from, for error messages and
	// status ("vault:kv/aokeyd/chains/core#2026-11", "file:/etc/aokeyd/keys.yaml:12").
	Source string
	// At is where the key is in its source (the key file's line and
	// column of its mapping, or the Vault chain's place) and Path its
	// YAML path there ("chains.core.keys[0]", "keys[0]"): the place of a
	// problem found with the key after decoding.
	At   Pos
	Path string
}

// String never includes the secret.
func (m MKT) String() string {
	return fmt.Sprintf("%s/%s send=%d recv=%d alg=%s", m.Chain, m.Name, m.SendID, m.RecvID, m.Algorithm)
}

// LogValue never includes the secret.
func (m MKT) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("chain", m.Chain),
		slog.String("key", m.Name),
		slog.Int("send_id", int(m.SendID)),
		slog.Int("recv_id", int(m.RecvID)),
		slog.String("alg", string(m.Algorithm)),
	)
}

// EffectiveMACLen is MACLen with the default applied.
func (m MKT) EffectiveMACLen() uint8 {
	if m.MACLen == 0 {
		return tcpao.DefaultMACLen
	}
	return m.MACLen
}

// Clone returns a deep copy with its own secret bytes.
func (m MKT) Clone() MKT {
	c := m
	c.Secret = m.Secret.Clone()
	c.Peers = slices.Clone(m.Peers)
	return c
}

// Zero wipes the secret bytes.
func (m *MKT) Zero() { m.Secret.Zero() }

// Key renders the MKT for one peer prefix as TCP_AO_ADD_KEY takes it. The
// returned key has its own copy of the secret, which the caller zeroes after
// use. ifindex is the VRF's L3 master ifindex (0 for the default VRF); the
// caller resolves VRF names.
func (m MKT) Key(peer netip.Prefix, ifindex int) tcpao.Key {
	return tcpao.Key{
		KeyRef:         tcpao.KeyRef{Peer: peer, IfIndex: ifindex, SendID: m.SendID, RecvID: m.RecvID},
		Algorithm:      m.Algorithm,
		MACLen:         m.EffectiveMACLen(),
		ExcludeOptions: !m.IncludeTCPOptions,
		Secret:         m.Secret.Clone(),
	}
}

// ActiveSend reports whether the MKT may be used to send at t.
func (m MKT) ActiveSend(t time.Time) bool { return !m.Revoked && m.SendLifetime.Contains(t) }

// ActiveAccept reports whether the MKT may be used to accept segments at t.
func (m MKT) ActiveAccept(t time.Time) bool { return !m.Revoked && m.AcceptLifetime.Contains(t) }

// ErrMirror is wrapped by CheckMirror's errors.
var ErrMirror = errors.New("keystore: mirrored MKTs disagree")

// CheckMirror checks that remote is the mirror image of local: the peer's
// SendID is our RecvID and its RecvID our SendID, and algorithm, secret, MAC
// length and TCP-option coverage are equal. Lifetimes are not compared (the
// operator may stagger them). The error lists every mismatch and never
// includes key bytes.
func CheckMirror(local, remote MKT) error {
	var errs []error
	if local.SendID != remote.RecvID {
		errs = append(errs, fmt.Errorf("%w: local send_id %d != remote recv_id %d", ErrMirror, local.SendID, remote.RecvID))
	}
	if local.RecvID != remote.SendID {
		errs = append(errs, fmt.Errorf("%w: local recv_id %d != remote send_id %d", ErrMirror, local.RecvID, remote.SendID))
	}
	if local.Algorithm != remote.Algorithm {
		errs = append(errs, fmt.Errorf("%w: algorithm %s != %s", ErrMirror, local.Algorithm, remote.Algorithm))
	}
	if !local.Secret.Equal(remote.Secret) {
		errs = append(errs, fmt.Errorf("%w: secrets differ", ErrMirror))
	}
	if local.EffectiveMACLen() != remote.EffectiveMACLen() {
		errs = append(errs, fmt.Errorf("%w: maclen %d != %d", ErrMirror, local.EffectiveMACLen(), remote.EffectiveMACLen()))
	}
	if local.IncludeTCPOptions != remote.IncludeTCPOptions {
		errs = append(errs, fmt.Errorf("%w: tcp_options include=%t != include=%t", ErrMirror, local.IncludeTCPOptions, remote.IncludeTCPOptions))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("key %q (local %s, remote %s): %w", local.Name, local.Source, remote.Source, errors.Join(errs...))
}

// CheckMirrorSnapshots pairs the MKTs of two routers' snapshots by chain and
// key name and runs CheckMirror on each pair. Keys present on one side only
// are reported too, except revoked ones.
func CheckMirrorSnapshots(local, remote *Snapshot) []error {
	var errs []error
	for _, cn := range local.ChainNames() {
		lc := local.Chains[cn]
		rc, ok := remote.Chains[cn]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: chain %q missing on the remote side", ErrMirror, cn))
			continue
		}
		for _, lk := range lc.Keys {
			rk, ok := rc.Key(lk.Name)
			if !ok {
				if !lk.Revoked {
					errs = append(errs, fmt.Errorf("%w: chain %q key %q missing on the remote side", ErrMirror, cn, lk.Name))
				}
				continue
			}
			if err := CheckMirror(lk, rk); err != nil {
				errs = append(errs, fmt.Errorf("chain %q: %w", cn, err))
			}
		}
		for _, rk := range rc.Keys {
			if _, ok := lc.Key(rk.Name); !ok && !rk.Revoked {
				errs = append(errs, fmt.Errorf("%w: chain %q key %q missing on the local side", ErrMirror, cn, rk.Name))
			}
		}
	}
	for _, cn := range remote.ChainNames() {
		if _, ok := local.Chains[cn]; !ok {
			errs = append(errs, fmt.Errorf("%w: chain %q missing on the local side", ErrMirror, cn))
		}
	}
	return errs
}

// Chain is a named list of MKTs read from one place in a source.
type Chain struct {
	Name string
	Keys []MKT
	// Version is the source's version of the chain (Vault KV v2 version,
	// or a content hash counter for files); it changes when the chain does.
	Version uint64
	// Rejected lists the MKTs of this chain that failed validation; the
	// valid ones in Keys still load.
	Rejected []error
	// MD5 is the chain's TCP-MD5 (RFC 2385) password, nil when it has
	// none: what the chain's peers authenticate with until they move to
	// TCP-AO (aoctl migrate).
	MD5 *MD5Password
}

// MD5Password is a chain's TCP-MD5 password. It applies to the chain's
// peers and VRF (the chain-level peers and vrf fields). Changing it is not
// hitless: a TCP-MD5 connection has one password, so aokeyd applies a
// changed password only at a planned reset, never on its own.
type MD5Password struct {
	// Secret is the password: 1..80 printable ASCII characters without
	// space, quote or backslash, so that it can be written into a
	// speaker's configuration line. It redacts itself when printed.
	Secret tcpao.Secret
	Peers  []netip.Prefix
	VRF    string
	// Revoked marks a compromised password: never installed again.
	Revoked bool
	// Source names where it was read ("file:/etc/aokeyd/keys.yaml:12").
	Source string
	// At and Path are where it is in its source, as MKT's.
	At   Pos
	Path string
}

// Clone returns a deep copy with its own secret bytes.
func (p *MD5Password) Clone() *MD5Password {
	if p == nil {
		return nil
	}
	c := *p
	c.Secret = p.Secret.Clone()
	c.Peers = slices.Clone(p.Peers)
	return &c
}

// Zero wipes the password.
func (p *MD5Password) Zero() {
	if p != nil {
		p.Secret.Zero()
	}
}

// Key renders the password for one peer prefix as TCP_MD5SIG_EXT takes
// it, with its own copy of the secret that the caller zeroes.
func (p *MD5Password) Key(peer netip.Prefix, ifindex int) tcpao.MD5Key {
	return tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: peer, IfIndex: ifindex}, Secret: p.Secret.Clone()}
}

// Key returns the MKT with the given name.
func (c *Chain) Key(name string) (MKT, bool) {
	for _, k := range c.Keys {
		if k.Name == name {
			return k, true
		}
	}
	return MKT{}, false
}

// Clone returns a deep copy with its own secret bytes.
func (c *Chain) Clone() *Chain {
	n := &Chain{Name: c.Name, Version: c.Version, Rejected: slices.Clone(c.Rejected), MD5: c.MD5.Clone()}
	n.Keys = make([]MKT, len(c.Keys))
	for i, k := range c.Keys {
		n.Keys[i] = k.Clone()
	}
	return n
}

// Zero wipes the secrets of every MKT of the chain.
func (c *Chain) Zero() {
	for i := range c.Keys {
		c.Keys[i].Zero()
	}
	c.MD5.Zero()
}

// Snapshot is an immutable view of a key source at one instant. The rest of
// aokeyd only ever sees snapshots.
//
// Ownership: every *Snapshot has exactly one owner, who calls Zero when it
// drops it. Source.Read returns a snapshot owned by the caller; Cache owns
// the snapshots it keeps and zeroes them when it replaces them, and
// Cache.Current returns a Clone owned by the caller. Never share one
// snapshot between goroutines that may zero it.
type Snapshot struct {
	Source string
	ReadAt time.Time
	Chains map[string]*Chain
	// Held lists what the Cache kept at its last good version, or could
	// not make up for, because the read lost it (see Hold).
	Held []Hold
}

// ChainNames returns the chain names in sorted order.
func (s *Snapshot) ChainNames() []string {
	names := make([]string, 0, len(s.Chains))
	for n := range s.Chains {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Versions maps each chain name to its source version.
func (s *Snapshot) Versions() map[string]uint64 {
	v := make(map[string]uint64, len(s.Chains))
	for n, c := range s.Chains {
		v[n] = c.Version
	}
	return v
}

// SameVersions reports whether s and o hold the same chains at the same
// source versions, i.e. nothing needs to be re-applied.
func (s *Snapshot) SameVersions(o *Snapshot) bool {
	if s == nil || o == nil {
		return s == o
	}
	if len(s.Chains) != len(o.Chains) {
		return false
	}
	for n, c := range s.Chains {
		oc, ok := o.Chains[n]
		if !ok || oc.Version != c.Version {
			return false
		}
	}
	return true
}

// Rejected returns the validation errors of all chains, in chain order.
func (s *Snapshot) Rejected() []error {
	var errs []error
	for _, n := range s.ChainNames() {
		errs = append(errs, s.Chains[n].Rejected...)
	}
	return errs
}

// Clone returns a deep copy with its own secret bytes.
func (s *Snapshot) Clone() *Snapshot {
	n := &Snapshot{Source: s.Source, ReadAt: s.ReadAt, Chains: make(map[string]*Chain, len(s.Chains)), Held: slices.Clone(s.Held)}
	for name, c := range s.Chains {
		n.Chains[name] = c.Clone()
	}
	return n
}

// Zero wipes every secret of the snapshot. The owner calls it when it drops
// the snapshot (see the type's doc comment). It is safe on nil.
func (s *Snapshot) Zero() {
	if s == nil {
		return
	}
	for _, c := range s.Chains {
		c.Zero()
	}
}

// Source is where MKTs come from.
type Source interface {
	// Name describes the source for logs and status ("vault https://…/kv",
	// "file /etc/aokeyd/keys.yaml").
	Name() string
	// Read returns a new snapshot. On error the caller keeps its last good
	// snapshot: nothing is deleted because a source is unreachable.
	Read(ctx context.Context) (*Snapshot, error)
	// Revoke marks the named key of a chain as revoked in the source, so that
	// other routers reading the same source learn of it.
	Revoke(ctx context.Context, chain, key string) error
}
