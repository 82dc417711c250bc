package rotator

// StatusOf returns one peer's status as its machine last published it
// (StateDown while no machine runs), without reading any other peer's;
// false for a peer the controller does not know.
func (c *Controller) StatusOf(peer PeerID) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.peers[peer]
	switch {
	case s == nil:
		return Status{}, false
	case s.run == nil:
		return Status{Peer: peer, State: StateDown}, true
	}
	return *s.run.status.Load(), true
}

// LastRead is the status of the machine that last ran for peer: the
// running one's, or while the peer is down the one stopped last (its
// Counters are what it last read of the session's socket); false when
// no machine ran for peer yet.
func (c *Controller) LastRead(peer PeerID) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.peers[peer]
	switch {
	case s == nil:
		return Status{}, false
	case s.run != nil:
		return *s.run.status.Load(), true
	case s.stopped != nil:
		return *s.stopped.status.Load(), true
	}
	return Status{}, false
}
