package rotator

import (
	"sync"

	"github.com/aokeyd/aokeyd/internal/refit"
	"github.com/aokeyd/aokeyd/tcpao"
)

// DownWatch keeps the bases of the rule for edits in place EditPeerDown
// (edit.go): for each listener key that no session up carries, its
// material's fingerprint and its counters when that was first seen. The
// first listener sync after the last session carrying a key ended takes
// its base, so the segments a key verifies or fails after the base came
// from peers that are down: connects. Invariants:
//   - A key has a base only while no session up carries it, and only for
//     the material it had then: a key a session up carries again, or
//     that is gone or of other material, loses its base; a new one is
//     taken at the next sync that sees it down.
//   - The watch is fed only by syncs that know every session up
//     (ListenerOptions.Up): a sync that does not leaves the bases alone.
//
// The listener syncs feed it (one at a time); Peek reads it from any
// goroutine. Its memory is lost with a restart; a base taken afresh after
// it counts from then (later failures only).
type DownWatch struct {
	mu    sync.Mutex
	bases map[SocketID]*downSet
	gen   uint64
	// compared counts the key comparisons (sameSessionKey) of every look:
	// with up indexed by peer prefix, O(keys) a look, not O(keys x peers)
	// (TestDownWatchComparesPerKey).
	compared int
}

// downSet is one listener's bases. A Go map keeps the buckets of its
// largest size: a listener's keys are all down at the daemon's start,
// before the sessions came up (16,384 at a route server), and once they
// are up a session carries one or two of its peer's keys, the others
// staying down (three quarters of them with four keys a peer): the map
// kept the buckets of every key, 2.25 MiB for the 12,288 bases of
// BenchmarkScrape's per-peer fleet, 1 MiB when made at their size.
// Invariant: peak is at least len(keys) and at most what keys held since
// it was made, and the look that leaves keys at three quarters of peak or
// fewer makes it afresh at its size (none at all when empty: the
// listener's entry goes), so that each copy follows a quarter of the
// bases gone since the last.
type downSet struct {
	keys map[refKey]downBase
	peak int
}

// downBase is one base and the sync that last saw its key down. The key
// itself is the map's (refKey): a fleet's listener holds one base for
// each key no session carries (tens of thousands at a route server), so
// a base is its material's fingerprint and counters alone (40 bytes, not
// a DownKey's 80).
type downBase struct {
	FP              tcpao.Fingerprint
	PktGood, PktBad uint64
	gen             uint64
}

// down is b as the planner takes it, for the key ref.
func (b downBase) down(ref tcpao.KeyRef) DownKey {
	return DownKey{Ref: ref, FP: b.FP, PktGood: b.PktGood, PktBad: b.PktBad}
}

// observe returns the bases of obs's keys (listener sock's) that no key in
// up names and that verified bad segments since their base (the others
// can take no edit by EditPeerDown), taking the base of each key it sees
// down for the first time.
func (w *DownWatch) observe(sock SocketID, obs *Observed, up []tcpao.KeyRef) []DownKey {
	return w.look(sock, obs, up, true)
}

// Peek is what a sync of listener sock, read as obs, would hand the
// planner (Observed.Down), without taking any base: a dry run's.
func (w *DownWatch) Peek(sock SocketID, obs *Observed, up []tcpao.KeyRef) []DownKey {
	return w.look(sock, obs, up, false)
}

// look is observe, and with take false Peek: a key without a base counts
// from now (it hands over nothing).
func (w *DownWatch) look(sock SocketID, obs *Observed, up []tcpao.KeyRef, take bool) []DownKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !take {
		var m map[refKey]downBase
		if set := w.bases[sock]; set != nil {
			m = set.keys
		}
		return w.peek(m, obs, w.index(up))
	}
	set := w.bases[sock]
	if set == nil {
		set = &downSet{keys: map[refKey]downBase{}}
	}
	m := set.keys
	w.gen++
	ups := w.index(up)
	var out []DownKey
	for i := range obs.Keys {
		k := &obs.Keys[i]
		if ups.names(k.KeyRef) {
			continue
		}
		key := keyOf(k.KeyRef)
		b, ok := m[key]
		if !ok || b.FP != k.Fingerprint {
			b = downBase{FP: k.Fingerprint, PktGood: k.PktGood, PktBad: k.PktBad}
		}
		b.gen = w.gen
		m[key] = b
		if k.PktBad > b.PktBad {
			out = append(out, b.down(k.KeyRef))
		}
	}
	set.peak = max(set.peak, len(m))
	for key, b := range m {
		if b.gen != w.gen {
			delete(m, key) // up again, or gone
		}
	}
	w.keep(sock, set)
	return out
}

// keep stores set as sock's after a look, without the buckets of a size
// it no longer has (downSet; w.mu held).
func (w *DownWatch) keep(sock SocketID, set *downSet) {
	switch {
	case len(set.keys) == 0:
		delete(w.bases, sock)
		return
	case len(set.keys) <= set.peak/4*3:
		set.keys = refit.Map(set.keys)
		set.peak = len(set.keys)
	}
	if w.bases == nil {
		w.bases = map[SocketID]*downSet{}
	}
	w.bases[sock] = set
}

// peek is look without taking bases: the keys of obs down (not in up)
// whose base in m shows bad segments since.
func (w *DownWatch) peek(m map[refKey]downBase, obs *Observed, up *upRefs) []DownKey {
	var out []DownKey
	for i := range obs.Keys {
		k := &obs.Keys[i]
		b, ok := m[keyOf(k.KeyRef)]
		if !ok || b.FP != k.Fingerprint || k.PktBad <= b.PktBad {
			continue
		}
		if !up.names(k.KeyRef) {
			out = append(out, b.down(k.KeyRef))
		}
	}
	return out
}

// upRefs are the keys the sessions up carry, normalised and indexed by
// peer prefix for one look: a listener key is compared with the keys of
// its own peer (and any wider prefix), not with every session's. A fleet
// shares its chains' IDs, so an index by IDs alone compared each of the
// listener's keys with every peer's: a sync of 1,024 peers was 80% this
// loop on the host (rotator BenchmarkSyncListenerFleet).
type upRefs struct {
	w    *DownWatch
	refs []tcpao.KeyRef
	idx  *refIndex
}

// index builds the upRefs of up (w.mu held).
func (w *DownWatch) index(up []tcpao.KeyRef) *upRefs {
	u := &upRefs{w: w, refs: make([]tcpao.KeyRef, len(up)), idx: newRefIndex(len(up))}
	for i, r := range up {
		u.refs[i] = normRef(r)
		u.idx.add(u.refs[i].Peer, i)
	}
	return u
}

// names reports whether a key of up is r on a session (sameSessionKey).
func (u *upRefs) names(r tcpao.KeyRef) bool {
	return u.idx.find(r, func(i int) bool {
		u.w.compared++
		return sameSessionKey(u.refs[i], r)
	}) >= 0
}

// Forget drops the bases of listeners not in socks (gone, or a restarted
// speaker's).
func (w *DownWatch) Forget(socks map[SocketID]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.bases {
		if !socks[s] {
			delete(w.bases, s)
		}
	}
}
