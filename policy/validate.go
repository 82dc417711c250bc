package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// Validate checks the policy against a key snapshot over [now, now+horizon)
// and returns every problem found (nil when there is none), in policy
// order. It finds:
//   - key chains whose source chain the snapshot lacks, and listed MKTs the
//     source chain lacks (ErrUnknownChain, ErrUnknownKey);
//   - MKTs the kernel would reject: unsupported algorithm, key empty or
//     longer than 80 bytes, bad MAC length (ErrAlgorithm, ErrKeyLength,
//     ErrMACLength), lifetimes that end before they start, and send
//     lifetimes outside the accept lifetime (widened by accept_tolerance),
//     the policy's overrides included (ErrInvalid);
//   - for each binding, two MKTs that may be installed at the same time and
//     share a SendID or RecvID (ErrDuplicateID);
//   - for each binding, instants with no send-valid key (ErrGap). For a
//     chain with a rotation, keys the generator is not due to create yet
//     (accept start after now) are assumed to come on schedule, so only the
//     time until the next due rotation is checked.
//
// For a binding of a prefix, an MKT restricted to some peers counts when
// its peers overlap the prefix.
func (p *Policy) Validate(snap *keystore.Snapshot, now time.Time, horizon time.Duration) Problems {
	v := &validation{p: p, now: now, end: now.Add(horizon)}
	if horizon <= 0 {
		v.end = now.Add(1)
	}
	resolved := map[string][]candidate{}
	for _, c := range p.chains {
		if cands, ok := v.resolve(c, snap); ok {
			resolved[c.Name] = cands
		}
	}
	bindings := slices.Concat(p.bindings, p.links)
	slices.SortStableFunc(bindings, func(x, y *Binding) int { return x.Pos.Line - y.Pos.Line }) // file order
	for _, b := range bindings {
		c := p.byName[b.KeyChain]
		cands, ok := resolved[c.Name]
		if !ok {
			continue
		}
		if b.IsLink() {
			// An interface neighbour's address is learned: its keys are
			// checked for the link-local addresses it peers with.
			lb := *b
			lb.Neighbor = LinkLocal
			b = &lb
		}
		v.binding(b, c, cands, md5Covers(snap, c, b))
	}
	return v.probs
}

// validation collects the problems Validate finds over [now, end).
type validation struct {
	p        *Policy
	now, end time.Time
	probs    Problems
	root     *yaml.Node // the policy's node tree, parsed at the first problem
	parsed   bool
}

// tree is the policy's node tree, parsed again once per validation and
// only when a problem needs a position.
func (v *validation) tree() *yaml.Node {
	if !v.parsed {
		v.root, v.parsed = v.p.tree(), true
	}
	return v.root
}

// add records a problem at the YAML path field, about candidate cd when it
// is not nil, and returns it.
func (v *validation) add(field string, cd *candidate, err error) *Problem {
	pr := &Problem{Pos: posOf(v.tree(), v.p.file, field), Field: field, Err: err}
	if cd != nil {
		pr.Chain, pr.Key, pr.Source = cd.mkt.Chain, cd.mkt.Name, cd.mkt.At.String()
		if pr.Source == "" {
			pr.Source = cd.mkt.Source
		}
	}
	v.probs = append(v.probs, pr)
	return pr
}

// resolve finds chain c's source chain and keys in snap and returns the
// keys a binding may use: not revoked, and nothing the kernel would reject.
// It reports false when the snapshot lacks the source chain.
func (v *validation) resolve(c *KeyChain, snap *keystore.Snapshot) ([]candidate, bool) {
	var sc *keystore.Chain
	if snap != nil {
		sc = snap.Chains[c.SourceChain]
	}
	if sc == nil {
		field := c.Field + ".name"
		if child(find(v.tree(), c.Field), "source_chain") != nil {
			field = c.Field + ".source_chain"
		}
		pr := v.add(field, nil, fmt.Errorf("%w: source chain %s is not in the key snapshot", ErrUnknownChain, shown(c.SourceChain)))
		if snap != nil {
			pr.Hint = "the key source's chains are: " + nameList(snap.ChainNames())
		}
		return nil, false
	}
	cands, missing := candidates(nil, c, sc)
	for _, ref := range missing {
		pr := v.add(ref.Field+".name", nil, fmt.Errorf("%w: source chain %q has no key %s", ErrUnknownKey, c.SourceChain, shown(ref.Name)))
		var names []string
		for _, m := range sc.Keys {
			names = append(names, m.Name)
		}
		pr.Hint = fmt.Sprintf("source chain %q has: %s", c.SourceChain, nameList(names))
		switch n := len(sc.Rejected); {
		case n == 1:
			pr.Hint += " and a key the key source rejected (see its problem)"
		case n > 1:
			pr.Hint += fmt.Sprintf(" and %d keys the key source rejected (see their problems)", n)
		}
	}
	var good []candidate
	for i := range cands {
		cd := &cands[i]
		if !cd.mkt.Revoked && v.usable(c, cd) {
			good = append(good, *cd)
		}
	}
	return good, true
}

// usable reports whether the kernel would take cd's MKT and its lifetimes
// make sense, recording a problem for each thing wrong.
func (v *validation) usable(c *KeyChain, cd *candidate) bool {
	field := c.Field
	if cd.ref != nil {
		field = cd.ref.Field
	}
	ok := true
	if err := checkMKT(cd.mkt); err != nil {
		v.add(field, cd, err)
		ok = false
	}
	for _, l := range []struct {
		name string
		l    keystore.Lifetime
	}{{"send", cd.send}, {"accept", cd.accept}} {
		if !l.l.Start.IsZero() && !l.l.End.IsZero() && !l.l.End.After(l.l.Start) {
			v.add(field, cd, fmt.Errorf("%w: %s lifetime %s ends before it starts", ErrInvalid, l.name, l.l))
			ok = false
		}
	}
	if acc := cd.accept.Widen(c.AcceptTolerance); ok && !acc.Covers(cd.send) {
		v.add(field, cd, fmt.Errorf("%w: send lifetime %s is not within its accept lifetime %s (accept_tolerance included): the peer would drop what the key signs outside it; narrow send_lifetime or widen accept_lifetime, here or in the key source",
			ErrInvalid, cd.send, acc))
		ok = false
	}
	return ok
}

// binding checks binding b of chain c, whose usable keys are cands: no two
// keys installed together share an ID, and a key may be sent with at every
// instant until the chain's next due rotation (or the end of the window).
//
// A TCP-MD5 peer (md5: its chain's password covers it) with no TCP-AO key
// yet has no gap: it sends with its password until it is migrated.
func (v *validation) binding(b *Binding, c *KeyChain, cands []candidate, md5 bool) {
	var mine []candidate
	for _, cd := range cands {
		if appliesToPrefix(cd.mkt, b.Neighbor, b.VRF) {
			mine = append(mine, cd)
		}
	}
	field := b.Field + ".key_chain"
	for i := range mine {
		for j := i + 1; j < len(mine); j++ {
			x, y := &mine[i], &mine[j]
			if !peersOverlap(x.mkt, y.mkt) || idClash(x.mkt, y.mkt) == nil {
				continue
			}
			from, both := installedTogether(x, y, c.AcceptTolerance, v.now, v.end)
			if !both {
				continue
			}
			v.add(field, x, fmt.Errorf("peer %s: %w (both installed from %s)", b, idClash(x.mkt, y.mkt), fmtTime(from)))
		}
	}
	if md5 && len(mine) == 0 {
		return
	}
	covEnd := v.coverageEnd(b, c)
	for _, g := range gaps(mine, v.now, covEnd) {
		kind := ErrGap
		if g.Start.After(v.now) {
			kind = ErrGapAhead
		}
		v.add(field, nil, fmt.Errorf("%w: peer %s (chain %s) has no key to send with from %s until %s",
			kind, b, c.SourceChain, fmtTime(g.Start), gapEnd(g.End, covEnd)))
	}
}

// md5Covers reports whether chain c's source chain holds a TCP-MD5
// password (not revoked) for binding b's neighbor.
func md5Covers(snap *keystore.Snapshot, c *KeyChain, b *Binding) bool {
	if snap == nil {
		return false
	}
	sc := snap.Chains[c.SourceChain]
	if sc == nil || sc.MD5 == nil || sc.MD5.Revoked || sc.MD5.VRF != b.VRF {
		return false
	}
	return slices.ContainsFunc(sc.MD5.Peers, func(p netip.Prefix) bool { return p.Overlaps(b.Neighbor) })
}

// coverageEnd is how far binding b must have a send key: the end of the
// window, or sooner when chain c's generator is due to create the next key
// (assumed to come on schedule).
func (v *validation) coverageEnd(b *Binding, c *KeyChain) time.Time {
	covEnd := v.end
	if c.Rotation != nil && c.Rotation.Interval > 0 {
		s := NewSchedule(*c.Rotation, v.p.seed)
		due := v.now.Add(c.Rotation.Lead) // the earliest any peer's next key can start sending
		if b.Neighbor.IsSingleIP() {
			due = s.NextDue(b.Neighbor.Addr(), v.now).SendStart
		}
		if due.Before(covEnd) {
			covEnd = due
		}
	}
	return covEnd
}

func appliesToPrefix(m *keystore.MKT, pfx netip.Prefix, vrf string) bool {
	if m.VRF != "" && m.VRF != vrf {
		return false
	}
	return len(m.Peers) == 0 || slices.ContainsFunc(m.Peers, pfx.Overlaps)
}

func peersOverlap(a, b *keystore.MKT) bool {
	if a.VRF != "" && b.VRF != "" && a.VRF != b.VRF {
		return false
	}
	if len(a.Peers) == 0 || len(b.Peers) == 0 {
		return true
	}
	for _, p := range a.Peers {
		if slices.ContainsFunc(b.Peers, p.Overlaps) {
			return true
		}
	}
	return false
}

// span is a half-open interval; zero bounds are unbounded.
type span = keystore.Lifetime

// intersect returns the intersection of a and b and whether it is non-empty.
func intersect(a, b span) (span, bool) {
	r := a
	if r.Start.IsZero() || (!b.Start.IsZero() && b.Start.After(r.Start)) {
		r.Start = b.Start
	}
	if r.End.IsZero() || (!b.End.IsZero() && b.End.Before(r.End)) {
		r.End = b.End
	}
	if !r.Start.IsZero() && !r.End.IsZero() && !r.End.After(r.Start) {
		return r, false
	}
	return r, true
}

// installedTogether reports the first instant in [now, end) at which x and
// y are both installed (send-valid or accept-valid within tolerance).
func installedTogether(x, y *candidate, tol time.Duration, now, end time.Time) (time.Time, bool) {
	window := span{Start: now, End: end}
	var first time.Time
	found := false
	for _, a := range []span{x.send, x.accept.Widen(tol)} {
		for _, b := range []span{y.send, y.accept.Widen(tol)} {
			ab, ok := intersect(a, b)
			if !ok {
				continue
			}
			w, ok := intersect(ab, window)
			if !ok {
				continue
			}
			if !found || w.Start.Before(first) {
				first, found = w.Start, true
			}
		}
	}
	return first, found
}

// gaps returns the sub-intervals of [from, to) that no send lifetime of
// cands covers.
func gaps(cands []candidate, from, to time.Time) []span {
	var out []span
	t := from
	for t.Before(to) {
		// Find the key that covers t and reaches furthest.
		covered, forever := false, false
		var reach time.Time
		for _, cd := range cands {
			if !cd.send.Contains(t) {
				continue
			}
			if cd.send.End.IsZero() {
				forever = true
				break
			}
			if !covered || cd.send.End.After(reach) {
				reach = cd.send.End
			}
			covered = true
		}
		if forever {
			return out
		}
		if covered {
			t = reach
			continue
		}
		// Not covered: the gap lasts until the next send start after t.
		next := to
		for _, cd := range cands {
			if s := cd.send.Start; s.After(t) && s.Before(next) {
				next = s
			}
		}
		out = append(out, span{Start: t, End: next})
		t = next
	}
	return out
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func gapEnd(e, horizon time.Time) string {
	if !e.Before(horizon) {
		return fmtTime(e) + " (end of the checked window)"
	}
	return fmtTime(e)
}
