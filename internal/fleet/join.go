package fleet

import (
	"cmp"
	"fmt"
	"github.com/aokeyd/aokeyd/internal/control"
	"net/netip"
	"slices"
	"strings"
	"time"
)

func idRef(send, recv uint8) string { return fmt.Sprintf("send=%d recv=%d", send, recv) }

// FlagKind classifies what is wrong with a link.
type FlagKind int

// Flag kinds.
const (
	// FarEndNotReporting: no router's document claims the peer's address
	// (a BIRD or other non-aokeyd end), or the far router has no peer for
	// this one. The link is shown from one end only.
	FarEndNotReporting FlagKind = iota + 1
	// Stale: an end's document is older than its stale limit: that
	// router stopped reporting.
	Stale
	// CurrentDiffers: the two ends send with different keys, for longer
	// than a roll takes.
	CurrentDiffers
	// AnnouncedNotHeld: one end announces a key (RNext_key, or the key its
	// roll is moving to) that the other end does not hold.
	AnnouncedNotHeld
	// IDsNotMirrored: a key both ends hold whose send ID at one end is not
	// the receive ID at the other (or the reverse).
	IDsNotMirrored
	// TCPOptionsDiffer: a key both ends hold with a different
	// include-TCP-options setting: it works while the session stays up and
	// fails on the next reconnect.
	TCPOptionsDiffer
	// ExpiringNoSuccessor: an end's current key stops being sendable
	// within the horizon and no later key is there to take over.
	ExpiringNoSuccessor
	// AuthDiffers: the two ends authenticate the session differently
	// (one TCP-MD5, the other TCP-AO) while neither is migrating: the
	// next reconnect fails.
	AuthDiffers
)

var flagNames = map[FlagKind]string{
	FarEndNotReporting: "far-end-not-reporting", Stale: "stale", CurrentDiffers: "current-differs",
	AnnouncedNotHeld: "announced-not-held", IDsNotMirrored: "ids-not-mirrored",
	TCPOptionsDiffer: "tcp-options-differ", ExpiringNoSuccessor: "expiring-no-successor", AuthDiffers: "auth-differs",
}

func (k FlagKind) String() string {
	if s, ok := flagNames[k]; ok {
		return s
	}
	return fmt.Sprintf("flag(%d)", int(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k FlagKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *FlagKind) UnmarshalText(b []byte) error {
	for kind, s := range flagNames {
		if s == string(b) {
			*k = kind
			return nil
		}
	}
	return fmt.Errorf("unknown flag kind %q", b)
}

// Flag is one problem of a link.
type Flag struct {
	Kind FlagKind `json:"kind"`
	// Router is the end the flag is about ("" for the link as a whole).
	Router string `json:"router,omitempty"`
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail"`
}

// End is one end of a link: a router and its peer entry for the far end.
type End struct {
	Router      string    `json:"router"`
	PublishedAt time.Time `json:"published_at"`
	Stale       bool      `json:"stale"`
	Peer        Peer      `json:"peer"`
}

// Link is a BGP session's two ends; B is nil when only A reports it.
type Link struct {
	A     End    `json:"a"`
	B     *End   `json:"b,omitempty"`
	Flags []Flag `json:"flags,omitempty"`
}

// Name is "A <-> B", with the far address when B does not report. An
// end outside its router's default VRF is named with it ("r1 vrf red"):
// the same two routers may be linked once in each of several VRFs.
func (l Link) Name() string {
	if l.B == nil {
		return l.A.label() + " <-> " + l.A.Peer.Addr().String() + " (not reporting)"
	}
	return l.A.label() + " <-> " + l.B.label()
}

// label is the end's router, with its VRF outside the default one.
func (e End) label() string {
	if e.Peer.ID.VRF == "" {
		return e.Router
	}
	return e.Router + " vrf " + e.Peer.ID.VRF
}

// JoinOptions tune Join.
type JoinOptions struct {
	Now time.Time
	// Horizon: a current key whose send lifetime ends within it needs a
	// successor (0: 7 days).
	Horizon time.Duration
	// StaleAfter: a document older than this is stale (0: three of its
	// router's refresh intervals, at least 30s).
	StaleAfter time.Duration
	// RollWindow: how long the ends may send with different keys (0: the
	// larger switch timeout of the two ends plus both refresh intervals).
	RollWindow time.Duration
}

// Join pairs the routers' peers into links and flags each. Links are
// ordered by their first end (router, then peer: address, then VRF).
//
// A peer p of router R and a peer q of router S (another router) may be
// the two ends of one session when p's address is one of S's and q's one
// of R's. An address is not a router: two routers may peer over the same
// addresses in several VRFs (VRF twins), and a provider edge's customers
// may use the same addresses in their own VRFs at it. So every possible
// pair is ranked by what ties its two ends together, strongest first
// (pairScore), and pairs are taken best first, each end in one link at
// most: one address in two VRFs is two links, each joining the ends of
// its own VRF. An end left without a far end is a link of its own,
// flagged far-end-not-reporting.
func Join(docs []Document, o JoinOptions) []Link {
	if o.Horizon == 0 {
		o.Horizon = 7 * 24 * time.Hour
	}
	// owners are the routers (document indexes, each once, in order)
	// claiming each address.
	owners := map[netip.Addr][]int{}
	for i, d := range docs {
		for _, a := range d.Addresses {
			if x := a.Unmap().WithZone(""); x.IsValid() && !slices.Contains(owners[x], i) {
				owners[x] = append(owners[x], i)
			}
		}
	}
	owns := func(i int, a netip.Addr) bool { return slices.Contains(owners[a], i) }
	type endID struct{ doc, peer int }
	type pair struct {
		a, b  endID
		score pairScore
	}
	var pairs []pair
	for i, d := range docs {
		for pi, p := range d.Peers {
			for _, j := range owners[p.Addr()] {
				if j <= i { // each two routers once: (j, i) is found from j's peers
					continue
				}
				for qi, q := range docs[j].Peers {
					if owns(i, q.Addr()) {
						pairs = append(pairs, pair{endID{i, pi}, endID{j, qi}, scorePair(p, q)})
					}
				}
			}
		}
	}
	peerOf := func(e endID) Peer { return docs[e.doc].Peers[e.peer] }
	// Best first; among equals, by the ends' routers and peers, so that
	// the documents' order does not matter.
	slices.SortStableFunc(pairs, func(x, y pair) int {
		return cmp.Or(y.score.compare(x.score),
			strings.Compare(docs[x.a.doc].RouterID, docs[y.a.doc].RouterID), comparePeers(peerOf(x.a), peerOf(y.a)),
			strings.Compare(docs[x.b.doc].RouterID, docs[y.b.doc].RouterID), comparePeers(peerOf(x.b), peerOf(y.b)))
	})
	paired := map[endID]bool{}
	var links []Link
	for _, pr := range pairs {
		if paired[pr.a] || paired[pr.b] {
			continue
		}
		paired[pr.a], paired[pr.b] = true, true
		da, db := docs[pr.a.doc], docs[pr.b.doc]
		a, b := end(da, peerOf(pr.a), o), end(db, peerOf(pr.b), o)
		if b.Router < a.Router {
			a, b = b, a
			da, db = db, da
		}
		links = append(links, Link{A: a, B: &b, Flags: twoEnded(a, b, da, db, o)})
	}
	for i, d := range docs {
		for pi, p := range d.Peers {
			if paired[endID{i, pi}] {
				continue
			}
			why := "no router reports address " + p.Addr().String()
			if j := slices.IndexFunc(owners[p.Addr()], func(j int) bool { return j != i }); j >= 0 {
				why = fmt.Sprintf("router %s has no peer for %s", docs[owners[p.Addr()][j]].RouterID, d.RouterID)
			}
			links = append(links, oneEnded(end(d, p, o), o, why))
		}
	}
	slices.SortFunc(links, func(x, y Link) int {
		return cmp.Or(strings.Compare(x.A.Router, y.A.Router), comparePeers(x.A.Peer, y.A.Peer))
	})
	return links
}

// comparePeers orders peers by address, then VRF.
func comparePeers(p, q Peer) int { return p.ID.Compare(q.ID) }

// pairScore is what ties two peers of two routers together as the ends
// of one session, compared field by field in order.
type pairScore struct {
	// sameVRF: both ends name the same VRF (VRF twins are named alike at
	// both ends, as the fleet's migration follow assumes too).
	sameVRF int
	// sessions: how many of the two established sessions run from the
	// other end's address (p's local address is q's address, and the
	// reverse): parallel sessions over several addresses.
	sessions int
	// keys: how many of one end's named keys the other holds (the two
	// ends of one chain).
	keys int
}

func (s pairScore) compare(o pairScore) int {
	return cmp.Or(cmp.Compare(s.sameVRF, o.sameVRF), cmp.Compare(s.sessions, o.sessions), cmp.Compare(s.keys, o.keys))
}

func scorePair(p, q Peer) pairScore {
	var s pairScore
	if p.ID.VRF == q.ID.VRF {
		s.sameVRF = 1
	}
	if p.Local.IsValid() && p.Local == q.Addr() {
		s.sessions++
	}
	if q.Local.IsValid() && q.Local == p.Addr() {
		s.sessions++
	}
	for _, k := range p.Keys {
		if _, ok := mirror(q, k); ok && k.Name != "" {
			s.keys++
		}
	}
	return s
}

func staleAfter(d Document, o JoinOptions) time.Duration {
	if o.StaleAfter > 0 {
		return o.StaleAfter
	}
	return max(3*time.Duration(d.Refresh), 30*time.Second)
}

func end(d Document, p Peer, o JoinOptions) End {
	return End{Router: d.RouterID, PublishedAt: d.PublishedAt, Peer: p,
		Stale: o.Now.Sub(d.PublishedAt) > staleAfter(d, o)}
}

func oneEnded(a End, o JoinOptions, why string) Link {
	l := Link{A: a}
	l.Flags = append(l.Flags, Flag{Kind: FarEndNotReporting, Detail: why + ": the link is seen from " + a.Router + " only"})
	l.Flags = append(l.Flags, endFlags(a, o)...)
	return l
}

// endFlags are the flags one end raises on its own.
func endFlags(e End, o JoinOptions) []Flag {
	var fs []Flag
	if e.Stale {
		fs = append(fs, Flag{Kind: Stale, Router: e.Router,
			Detail: fmt.Sprintf("last report %s ago", o.Now.Sub(e.PublishedAt).Truncate(time.Second))})
	}
	cur, ok := currentKey(e.Peer)
	if ok && !cur.SendEnd.IsZero() && cur.SendEnd.Sub(o.Now) < o.Horizon {
		successor := slices.ContainsFunc(e.Peer.Keys, func(k Key) bool {
			return k.Ref() != cur.Ref() && k.State != "revoked" && k.State != "retiring" &&
				(k.SendEnd.IsZero() || k.SendEnd.After(cur.SendEnd))
		})
		if !successor {
			fs = append(fs, Flag{Kind: ExpiringNoSuccessor, Router: e.Router, Key: cur.Ref(),
				Detail: fmt.Sprintf("send lifetime ends %s, no key to take over", cur.SendEnd.UTC().Format(time.RFC3339))})
		}
	}
	return fs
}

func currentKey(p Peer) (Key, bool) {
	for _, k := range p.Keys {
		if k.Current {
			return k, true
		}
	}
	return Key{}, false
}

// mirror finds the key of p that matches k held at the other end: the same
// name, or for unnamed keys the swapped IDs.
func mirror(p Peer, k Key) (Key, bool) {
	for _, x := range p.Keys {
		if k.Name != "" && x.Name == k.Name && x.Chain == k.Chain {
			return x, true
		}
		if k.Name == "" && x.SendID == k.RecvID && x.RecvID == k.SendID {
			return x, true
		}
	}
	return Key{}, false
}

// fixedAuth reports whether auth is a settled kind (not none, unknown or
// a migration in progress).
func fixedAuth(auth string) bool { return auth == control.AuthMD5 || auth == control.AuthAO }

func twoEnded(a, b End, da, db Document, o JoinOptions) []Flag {
	var fs []Flag
	fs = append(fs, endFlags(a, o)...)
	fs = append(fs, endFlags(b, o)...)
	if fixedAuth(a.Peer.Auth) && fixedAuth(b.Peer.Auth) && a.Peer.Auth != b.Peer.Auth {
		fs = append(fs, Flag{Kind: AuthDiffers, Detail: fmt.Sprintf("%s authenticates with %s, %s with %s", a.Router, a.Peer.Auth, b.Router, b.Peer.Auth)})
	}
	// Keys both ends hold: mirrored IDs and the same TCP-options setting.
	for _, k := range a.Peer.Keys {
		if k.Name == "" {
			continue
		}
		m, ok := mirror(b.Peer, k)
		if !ok {
			continue
		}
		if k.SendID != m.RecvID || k.RecvID != m.SendID {
			fs = append(fs, Flag{Kind: IDsNotMirrored, Key: k.Ref(), Detail: fmt.Sprintf("%s has send=%d recv=%d, %s has send=%d recv=%d",
				a.Router, k.SendID, k.RecvID, b.Router, m.SendID, m.RecvID)})
		}
		if k.IncludeTCPOptions != m.IncludeTCPOptions {
			fs = append(fs, Flag{Kind: TCPOptionsDiffer, Key: k.Ref(), Detail: fmt.Sprintf("%s include-tcp-options=%t, %s include-tcp-options=%t",
				a.Router, k.IncludeTCPOptions, b.Router, m.IncludeTCPOptions)})
		}
	}
	// Announced keys the other end does not hold.
	for _, x := range [][2]End{{a, b}, {b, a}} {
		from, to := x[0], x[1]
		seen := map[string]bool{}
		for _, k := range from.Peer.Keys {
			if !k.RNext && from.Peer.Roll.PendingKey != k.Ref() {
				continue
			}
			if _, ok := mirror(to.Peer, k); ok || seen[k.Ref()] {
				continue
			}
			seen[k.Ref()] = true
			what := "announces it as RNext_key"
			if !k.RNext {
				what = "is rolling to it"
			}
			fs = append(fs, Flag{Kind: AnnouncedNotHeld, Router: to.Router, Key: k.Ref(),
				Detail: fmt.Sprintf("%s %s; %s does not hold it", from.Router, what, to.Router)})
		}
	}
	// Different current keys for longer than a roll takes.
	ca, okA := currentKey(a.Peer)
	cb, okB := currentKey(b.Peer)
	if okA && okB {
		m, ok := mirror(b.Peer, ca)
		same := ok && m.Ref() == cb.Ref()
		if !same {
			window := o.RollWindow
			if window == 0 {
				window = max(time.Duration(da.SwitchTimeout), time.Duration(db.SwitchTimeout)) + time.Duration(da.Refresh) + time.Duration(db.Refresh)
			}
			since := a.Peer.CurrentSince
			if b.Peer.CurrentSince.After(since) {
				since = b.Peer.CurrentSince
			}
			if d := o.Now.Sub(since); !since.IsZero() && d > window {
				fs = append(fs, Flag{Kind: CurrentDiffers, Key: ca.Ref() + " / " + cb.Ref(),
					Detail: fmt.Sprintf("%s sends with %s, %s with %s, for %s (a roll takes up to %s)",
						a.Router, ca.Ref(), b.Router, cb.Ref(), d.Truncate(time.Second), window)})
			}
		}
	}
	return fs
}
