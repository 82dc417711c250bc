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
