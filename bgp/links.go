package bgp

import (
	"slices"
	"sync"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

// linkTable is the last report of each interface neighbour (PeerInfo.Link,
// issue 53) the speaker lists, whatever its session's state: the address
// each one learned must be keyed on the listener before its session comes
// up, and it is learned (from a router advertisement) while the session
// is still down. Every interface neighbour is in it, managed or not: the
// daemon decides which it keys.
type linkTable struct {
	mu sync.Mutex
	m  map[peer.Key]PeerInfo
}

// sync makes the table the interface neighbours of peers, the speaker's
// full list; it reports whether a learned address appeared, changed or
// went.
func (l *linkTable) sync(peers []PeerInfo) bool {
	m := map[peer.Key]PeerInfo{}
	for _, p := range peers {
		if p.Link.IsValid() {
			m[p.Key()] = p
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := len(m) != len(l.m)
	for k, p := range m {
		if old, ok := l.m[k]; !ok || old.Neighbor != p.Neighbor {
			changed = true
		}
	}
	l.m = m
	return changed
}

// note records one report; it reports whether the neighbour's learned
// address changed.
func (l *linkTable) note(p PeerInfo) bool {
	if !p.Link.IsValid() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[peer.Key]PeerInfo{}
	}
	old, ok := l.m[p.Key()]
	l.m[p.Key()] = p
	return !ok || old.Neighbor != p.Neighbor
}

// LinkPeers is the last report of each interface neighbour the speaker
// lists, established or not, ordered by key: the address each learned
// (Neighbor, invalid before one) is what the listener is keyed for.
func (t *Tracker) LinkPeers() []PeerInfo {
	t.links.mu.Lock()
	out := make([]PeerInfo, 0, len(t.links.m))
	for _, p := range t.links.m {
		out = append(out, p)
	}
	t.links.mu.Unlock()
	slices.SortFunc(out, func(a, b PeerInfo) int { return a.Key().Compare(b.Key()) })
	return out
}

// linksNoted calls TrackerOptions.LinksChanged when changed.
func (t *Tracker) linksNoted(changed bool) {
	if changed && t.opt.LinksChanged != nil {
		t.opt.LinksChanged()
	}
}
