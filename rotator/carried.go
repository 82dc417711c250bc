package rotator

import (
	"maps"
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// What the never-strand rule knows of the keys each peer's sessions carry,
// and how it survives a restart. Invariants:
//   - A peer's carried keys are, in this order of precedence: those its
//     running machine last read from the session's socket; else those its
//     last session carried when its machine stopped (peerSlot.carried,
//     with what that machine published after, while its step ended);
//     else those Restore handed over from before a restart.
//   - A restored entry stands until a session of that peer has been read
//     (its machine published a read) or the peer is forgotten: a restart
//     never makes a peer that is down, or whose session was not read yet,
//     look as if it carried nothing.
//   - The caller persists CarriedByPeer before it acts on Carried (a
//     listener sync that may delete a key no longer carried), so a crash
//     after the action restores at least what the action relied on.

// Restore hands the controller what each peer's sessions carried before
// a restart (a durable record's content). It is called before the first
// Accepted; a later call replaces the restored entries.
func (c *Controller) Restore(carried map[PeerID][]CarriedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restored = maps.Clone(carried)
}

// carriedLocked is one peer's carried keys by the precedence above, and
// whether a session of the peer was read since the start. c.mu is held.
func (c *Controller) carriedLocked(peer PeerID, s *peerSlot) (keys []CarriedKey, read bool) {
	if s != nil && s.run != nil {
		if st := s.run.status.Load(); st != nil && !st.Counters.At.IsZero() {
			delete(c.restored, peer) // superseded by the session read
			return carriedOf(st.Counters), true
		}
	}
	if s != nil && s.stopped != nil {
		// The stopped machine's step may have ended after PeerDown took
		// s.carried (a write that had not returned): what it published
		// last counts too. Both are of the same session.
		if st := s.stopped.status.Load(); st != nil && !st.Counters.At.IsZero() {
			delete(c.restored, peer)
			return unionCarried(s.carried, carriedOf(st.Counters)), true
		}
	}
	if s != nil && s.carried != nil {
		delete(c.restored, peer)
		return s.carried, true
	}
	return c.restored[peer], false
}

// CarriedByPeer are the keys each peer's sessions carry (see the
// precedence above), the content of the durable record of them. Peers
// with none are left out.
func (c *Controller) CarriedByPeer() map[PeerID][]CarriedKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[PeerID][]CarriedKey{}
	for id, s := range c.peers {
		if ks, _ := c.carriedLocked(id, s); len(ks) > 0 {
			out[id] = slices.Clone(ks)
		}
	}
	for id, ks := range c.restored {
		if _, ok := c.peers[id]; !ok && len(ks) > 0 {
			out[id] = slices.Clone(ks)
		}
	}
	return out
}

// Carried are the keys every peer's sessions carry (CarriedByPeer), as
// one list: the keys a listener must keep (Observed.Carried).
func (c *Controller) Carried() []tcpao.KeyRef { return CarriedRefs(c.CarriedByPeer()) }

// CarriedRefs are the references of byPeer's keys, as one list.
func CarriedRefs(byPeer map[PeerID][]CarriedKey) []tcpao.KeyRef {
	var out []tcpao.KeyRef
	for _, ks := range byPeer {
		for _, k := range ks {
			out = append(out, k.Ref)
		}
	}
	return out
}

// Read reports whether the machine running on peer's session has read
// its socket (published counters): what the session carries is known
// from the kernel, not from memory or a record. False while the peer has
// no machine.
func (c *Controller) Read(peer PeerID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.peers[peer]
	if s == nil || s.run == nil {
		return false
	}
	st := s.run.status.Load()
	return st != nil && !st.Counters.At.IsZero()
}

// CarriedUp are the keys the sessions that are up carry, as their
// machines last read them, and whether every running machine has read its
// session (complete): what the listener sync hands DownWatch
// (ListenerOptions.Up), which needs them all.
func (c *Controller) CarriedUp() (up []tcpao.KeyRef, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	complete = true
	for _, s := range c.peers {
		if s.run == nil {
			continue
		}
		st := s.run.status.Load()
		if st == nil || st.Counters.At.IsZero() {
			complete = false
			continue
		}
		up = append(up, st.Counters.Carried...)
	}
	return up, complete
}

// unionCarried is a with b's keys that a lacks (a itself when b adds none).
func unionCarried(a, b []CarriedKey) []CarriedKey {
	out := a
	for _, k := range b {
		if !slices.ContainsFunc(a, func(x CarriedKey) bool { return x.Ref == k.Ref }) {
			if len(out) == len(a) {
				out = slices.Clone(a)
			}
			out = append(out, k)
		}
	}
	return out
}
