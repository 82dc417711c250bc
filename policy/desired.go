package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ScheduledKey is one MKT of a peer's chain with its effective schedule
// (lifetimes) at an instant: what should be installed on the peer's socket.
// (rotator.DesiredKey is the rotator's view of it: the kernel key and its
// role in a roll.)
type ScheduledKey struct {
	// MKT is the snapshot's MKT. Its Secret shares the snapshot's bytes:
	// never zero it; TCPAOKey returns a copy to hand to the kernel.
	MKT keystore.MKT
	// SendLifetime and AcceptLifetime are the effective lifetimes: the
	// policy's overrides, else the MKT's own.
	SendLifetime   keystore.Lifetime
	AcceptLifetime keystore.Lifetime
	// IncludeTCPOptions is the binding's setting when it has one, else the
	// MKT's.
	IncludeTCPOptions bool
	// Sendable: the key is send-valid at the instant asked about.
	Sendable bool
}

// TCPAOKey is the key to install for peer (the binding's neighbor prefix or
// the connected peer's host prefix) on an L3 device (0: default VRF). The
// Secret is a fresh copy: the caller zeroes it after use.
func (k ScheduledKey) TCPAOKey(peer netip.Prefix, ifindex int) tcpao.Key {
	return k.key(peer, ifindex, k.MKT.Secret.Clone())
}

// SharedTCPAOKey is TCPAOKey with the secret's shared copy
// (tcpao.Secret.Shared): the copy every other holder of the same material
// uses, which Zero leaves as it is and which is wiped once nothing refers
// to it.
func (k ScheduledKey) SharedTCPAOKey(peer netip.Prefix, ifindex int) tcpao.Key {
	return k.key(peer, ifindex, k.MKT.Secret.Shared())
}

func (k ScheduledKey) key(peer netip.Prefix, ifindex int, secret tcpao.Secret) tcpao.Key {
	return tcpao.Key{
		KeyRef:         tcpao.KeyRef{Peer: peer, IfIndex: ifindex, SendID: k.MKT.SendID, RecvID: k.MKT.RecvID},
		Algorithm:      k.MKT.Algorithm,
		MACLen:         k.MKT.MACLen,
		ExcludeOptions: !k.IncludeTCPOptions,
		Secret:         secret,
	}
}

func (k ScheduledKey) String() string { return k.MKT.String() }

// PeerKeys is the desired TCP-AO state of one peer at one instant.
type PeerKeys struct {
	Binding Binding
	// Chain is the policy key chain (Binding.KeyChain); SourceChain the
	// snapshot chain it reads.
	Chain       string
	SourceChain string
	// Keys are the MKTs to have installed: accept-valid within
	// ±AcceptTolerance of the instant, or send-valid at it. Sorted by
	// SendID, RecvID, name.
	Keys []ScheduledKey
	// Preferred indexes Keys: the key to send with (Current_key), the
	// send-valid key with the latest send start; ties go to the later send
	// end, then the greater name. -1 when no key may be sent with.
	Preferred  int
	AORequired bool
	Safety     Safety
	// Revoked names revoked MKTs of the chain that apply to the peer: they
	// are never desired, and must be removed if installed (see
	// Safety.OnRevokeOnlyKey when nothing else is left).
	Revoked []string
	// Expired names the MKTs that apply to the peer whose lifetimes have
	// ended (send and accept), when Safety.OnKeyExpiry is remove: like
	// Revoked, they must be removed if installed, even in use. Empty
	// with keep: the never-strand rule keeps what a session uses.
	Expired []string
	// Ignored lists MKTs the kernel would reject (bad algorithm, key or MAC
	// length); they are not desired. Validate reports them too.
	Ignored []error
	// NextChange is the next instant after the one asked about at which the
	// answer changes for the same snapshot; zero when it never does.
	NextChange time.Time
	// MD5 is the source chain's TCP-MD5 password when it applies to the
	// peer (its peers cover it, its VRF is the peer's): the snapshot's,
	// not a copy. MD5Revoked is set instead when that password is
	// revoked.
	MD5        *keystore.MD5Password
	MD5Revoked bool
}

// PreferredKey returns Keys[Preferred].
func (pk PeerKeys) PreferredKey() (ScheduledKey, bool) {
	if pk.Preferred < 0 || pk.Preferred >= len(pk.Keys) {
		return ScheduledKey{}, false
	}
	return pk.Keys[pk.Preferred], true
}

// candidate is an MKT of a chain with its effective lifetimes.
type candidate struct {
	mkt    *keystore.MKT
	send   keystore.Lifetime
	accept keystore.Lifetime
	ref    *KeyRef
}

// candidates resolves a policy chain against its snapshot chain, appending
// to out (Desired passes a buffer on its stack). missing lists the policy's
// key references the snapshot does not have. A listed key is found by a
// linear search of the source chain: chains hold a handful of keys, for
// which that is cheaper than building a map on every call.
func candidates(out []candidate, c *KeyChain, sc *keystore.Chain) (_ []candidate, missing []*KeyRef) {
	if c.Keys == nil {
		out = slices.Grow(out, len(sc.Keys))
		for i := range sc.Keys {
			m := &sc.Keys[i]
			out = append(out, candidate{mkt: m, send: m.SendLifetime, accept: m.AcceptLifetime})
		}
		return out, nil
	}
	out = slices.Grow(out, len(c.Keys))
	for i := range c.Keys {
		ref := &c.Keys[i]
		j := slices.IndexFunc(sc.Keys, func(m keystore.MKT) bool { return m.Name == ref.Name })
		if j < 0 {
			missing = append(missing, ref)
			continue
		}
		m := &sc.Keys[j]
		cd := candidate{mkt: m, send: m.SendLifetime, accept: m.AcceptLifetime, ref: ref}
		if ref.SendLifetime != nil {
			cd.send = *ref.SendLifetime
		}
		if ref.AcceptLifetime != nil {
			cd.accept = *ref.AcceptLifetime
		}
		out = append(out, cd)
	}
	return out, missing
}

// checkMKT reports what the kernel would reject in m.
func checkMKT(m *keystore.MKT) error {
	if !m.Algorithm.Valid() {
		return fmt.Errorf("%w: %q (want one of %s)", ErrAlgorithm, m.Algorithm, algorithmList())
	}
	if err := checkKeyLength(m.Algorithm, m.Secret.Len()); err != nil {
		return err
	}
	if m.MACLen != 0 {
		if err := checkMACLength(m.Algorithm, int(m.MACLen)); err != nil {
			return err
		}
	}
	return nil
}

// appliesTo: an MKT with Peers applies only to addresses inside them, one
// with a VRF only in that VRF; empty means unrestricted.
func appliesTo(m *keystore.MKT, peer netip.Addr, vrf string) bool {
	if m.VRF != "" && m.VRF != vrf {
		return false
	}
	if len(m.Peers) == 0 {
		return true
	}
	return slices.ContainsFunc(m.Peers, func(p netip.Prefix) bool { return p.Contains(peer) })
}

// Desired returns the keys peer (in vrf, "" for the default VRF) should have
// at t according to the policy and snap. It is pure: the same arguments
// give the same answer. Errors wrap ErrNoBinding (no binding covers the
// peer), ErrUnknownChain (the snapshot lacks the source chain) or
// ErrDuplicateID (two keys due at t clash on an ID; the kernel would refuse
// the second, so nothing should change).
func (p *Policy) Desired(snap *keystore.Snapshot, peer netip.Addr, vrf string, t time.Time) (PeerKeys, error) {
	peer = peer.Unmap().WithZone("")
	b, c, sc, err := p.chainOf(snap, peer, vrf)
	if err != nil {
		return PeerKeys{}, err
	}
	return desired(b, c, sc, peer, vrf, t)
}

// DesiredOnLink is Desired for the interface neighbour on the interface
// named iface in vrf, which learned addr (issue 53): its binding is the
// interface's (BindingForLink), the keys those that apply to addr. An
// error when addr is not valid (nothing learned yet: nothing to key).
func (p *Policy) DesiredOnLink(snap *keystore.Snapshot, iface string, addr netip.Addr, vrf string, t time.Time) (PeerKeys, error) {
	if !addr.IsValid() {
		return PeerKeys{}, fmt.Errorf("interface neighbour on %s in VRF %q: no address learned", iface, vrf)
	}
	addr = addr.Unmap().WithZone("")
	i := slices.IndexFunc(p.links, func(b *Binding) bool { return b.VRF == vrf && b.BindsLink(iface) })
	if i < 0 {
		return PeerKeys{}, fmt.Errorf("%w: interface neighbour on %s in VRF %q", ErrNoBinding, iface, vrf)
	}
	b := p.links[i]
	c, sc, err := p.chainsOf(snap, b)
	if err != nil {
		return PeerKeys{}, err
	}
	return desired(b, c, sc, addr, vrf, t)
}

// desired is the keys binding b, with policy chain c reading snapshot
// chain sc, gives peer in vrf at t.
func desired(b *Binding, c *KeyChain, sc *keystore.Chain, peer netip.Addr, vrf string, t time.Time) (PeerKeys, error) {
	pk := PeerKeys{
		Binding: *b, Chain: c.Name, SourceChain: c.SourceChain,
		Preferred: -1, AORequired: b.AORequired, Safety: b.Safety,
	}
	var buf [8]candidate
	cands, _ := candidates(buf[:0], c, sc)
	due := pk.selectDue(cands, sc.Name, c.AcceptTolerance, peer, vrf, t, b.Safety.OnKeyExpiry == ExpiryRemove)
	pk.Keys = desiredKeys(due, b, t)
	for i := range pk.Keys {
		for j := i + 1; j < len(pk.Keys); j++ {
			if err := idClash(&pk.Keys[i].MKT, &pk.Keys[j].MKT); err != nil {
				return PeerKeys{}, fmt.Errorf("peer %s: %w", b, err)
			}
		}
	}
	pk.Preferred = preferred(pk.Keys)
	if m := sc.MD5; m != nil && m.VRF == vrf && slices.ContainsFunc(m.Peers, func(p netip.Prefix) bool { return p.Contains(peer) }) {
		if m.Revoked {
			pk.MD5Revoked = true
		} else {
			pk.MD5 = m
		}
	}
	return pk, nil
}

// selectDue keeps in place the candidates that apply to peer in vrf and are
// installed at t (send-valid, or accept-valid within tol), and returns them.
// On the way it records in pk the revoked keys, with expire the expired ones (OnKeyExpiry remove), the keys the kernel would
// reject (as problems of source chain source), and the next instant a
// candidate's lifetimes change the answer.
func (pk *PeerKeys) selectDue(cands []candidate, source string, tol time.Duration, peer netip.Addr, vrf string, t time.Time, expire bool) []candidate {
	due := cands[:0]
	for _, cd := range cands {
		m := cd.mkt
		if !appliesTo(m, peer, vrf) {
			continue
		}
		if m.Revoked {
			pk.Revoked = append(pk.Revoked, m.Name)
			continue
		}
		if err := checkMKT(m); err != nil {
			pk.Ignored = append(pk.Ignored, &Problem{Chain: source, Key: m.Name, Source: m.Source, Err: err})
			continue
		}
		wide := cd.accept.Widen(tol)
		for _, at := range []time.Time{cd.send.Start, cd.send.End, wide.Start, wide.End} {
			if at.After(t) && (pk.NextChange.IsZero() || at.Before(pk.NextChange)) {
				pk.NextChange = at
			}
		}
		switch {
		case cd.send.Contains(t) || wide.Contains(t):
			due = append(due, cd)
		case expire && ended(cd.send, t) && ended(wide, t):
			pk.Expired = append(pk.Expired, m.Name)
		}
	}
	return due
}

// ended reports whether l has an end and t is at or past it.
func ended(l keystore.Lifetime, t time.Time) bool { return !l.End.IsZero() && !t.Before(l.End) }

// desiredKeys sorts the due candidates (smaller than ScheduledKey to swap) by
// SendID, RecvID and name, and turns them into the keys binding b should
// have at t, allocating once; nil when none is due.
func desiredKeys(due []candidate, b *Binding, t time.Time) []ScheduledKey {
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(x.mkt.SendID, y.mkt.SendID), cmp.Compare(x.mkt.RecvID, y.mkt.RecvID),
			cmp.Compare(x.mkt.Name, y.mkt.Name))
	})
	keys := make([]ScheduledKey, len(due))
	for i, cd := range due {
		inc := cd.mkt.IncludeTCPOptions
		if b.IncludeTCPOptions != nil {
			inc = *b.IncludeTCPOptions
		}
		keys[i] = ScheduledKey{
			MKT: *cd.mkt, SendLifetime: cd.send, AcceptLifetime: cd.accept,
			IncludeTCPOptions: inc, Sendable: cd.send.Contains(t),
		}
	}
	return keys
}

// preferred returns the index of the key to send with (see
// PeerKeys.Preferred), -1 when no key is sendable.
func preferred(keys []ScheduledKey) int {
	best := -1
	for i, k := range keys {
		if k.Sendable && (best < 0 || preferBefore(k, keys[best])) {
			best = i
		}
	}
	return best
}

func idClash(a, b *keystore.MKT) error {
	switch {
	case a.SendID == b.SendID:
		return fmt.Errorf("%w: keys %s and %s of chain %s both have SendID %d", ErrDuplicateID, a.Name, b.Name, a.Chain, a.SendID)
	case a.RecvID == b.RecvID:
		return fmt.Errorf("%w: keys %s and %s of chain %s both have RecvID %d", ErrDuplicateID, a.Name, b.Name, a.Chain, a.RecvID)
	}
	return nil
}

// preferBefore reports whether send key a beats b: later send start, then
// later send end (no end is latest), then greater name.
func preferBefore(a, b ScheduledKey) bool {
	if c := a.SendLifetime.Start.Compare(b.SendLifetime.Start); c != 0 {
		return c > 0
	}
	ae, be := a.SendLifetime.End, b.SendLifetime.End
	switch {
	case ae.IsZero() != be.IsZero():
		return ae.IsZero()
	case !ae.Equal(be):
		return ae.After(be)
	}
	return a.MKT.Name > b.MKT.Name
}

// KeyIDs are the SendID and RecvID of one MKT.
type KeyIDs struct{ Send, Recv uint8 }

// IDsAhead are the IDs of every MKT the peer's chain may install from t on:
// its keys whose send or accept lifetime has not ended at t, due now or
// later. A check that must hold across the chain's rolls reads them (a
// migration's covering prefix may overlap other peers' keys, and the
// kernel refuses overlapping keys that share an ID).
func (p *Policy) IDsAhead(snap *keystore.Snapshot, peer netip.Addr, vrf string, t time.Time) ([]KeyIDs, error) {
	_, c, sc, err := p.chainOf(snap, peer.Unmap().WithZone(""), vrf)
	if err != nil {
		return nil, err
	}
	var buf [8]candidate
	cands, _ := candidates(buf[:0], c, sc)
	var ids []KeyIDs
	for _, cd := range cands {
		ended := func(l keystore.Lifetime) bool { return !l.End.IsZero() && !l.End.After(t) }
		if ended(cd.send) && ended(cd.accept.Widen(c.AcceptTolerance)) {
			continue
		}
		if id := (KeyIDs{cd.mkt.SendID, cd.mkt.RecvID}); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// chainOf is the peer's binding, its policy key chain and the snapshot
// chain that one reads (peer unmapped, without zone). Errors wrap
// ErrNoBinding or ErrUnknownChain.
func (p *Policy) chainOf(snap *keystore.Snapshot, peer netip.Addr, vrf string) (*Binding, *KeyChain, *keystore.Chain, error) {
	b, err := p.bindingFor(peer, vrf)
	if err != nil {
		return nil, nil, nil, err
	}
	c, sc, err := p.chainsOf(snap, b)
	return b, c, sc, err
}

// chainsOf is binding b's policy key chain and the snapshot chain it
// reads; an error wrapping ErrUnknownChain when snap lacks it.
func (p *Policy) chainsOf(snap *keystore.Snapshot, b *Binding) (*KeyChain, *keystore.Chain, error) {
	c := p.byName[b.KeyChain]
	var sc *keystore.Chain
	if snap != nil {
		sc = snap.Chains[c.SourceChain]
	}
	if sc == nil {
		return nil, nil, fmt.Errorf("%w: key chain %q reads source chain %q, which the snapshot does not have",
			ErrUnknownChain, c.Name, c.SourceChain)
	}
	return c, sc, nil
}
