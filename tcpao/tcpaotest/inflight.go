package tcpaotest

import (
	"fmt"
	"net/netip"
)

// Segment is one established segment in flight: signed by its sender when
// Sign took it, verified by the receiver when Deliver hands it over. Between
// the two either end may change its keys (a model of segments that cross a
// key change in the network, as Exchange's back-to-back segments cannot).
type Segment struct {
	from netip.Addr
	seg  *segment
}

// Sign signs a segment on the established socket a with its Current_key,
// carrying its RNext_key's RecvID, for a later Deliver. A socket without
// TCP-AO sends an unsigned segment.
func (n *Net) Sign(a *Sock) (*Segment, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a.net != n || a.state != stateEstablished {
		return nil, fmt.Errorf("tcpaotest: sign on a %s socket: %w", a.state, eINVAL)
	}
	return &Segment{from: a.local.Addr(), seg: a.sign()}, nil
}

// Deliver hands s to the established socket b, with the rules of
// tcp_inbound_ao_hash (verification, counters, the switch of Current_key
// to the key the segment's RNextKeyID names). It returns ErrTimeout when b
// drops the segment.
func (n *Net) Deliver(s *Segment, b *Sock) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b.net != n || b.state != stateEstablished || b.peer != s.from {
		return fmt.Errorf("tcpaotest: deliver a segment from %s to a %s socket of %s: %w", s.from, b.state, b.peer, eINVAL)
	}
	if !b.receiveEstablished(s.from, s.seg) {
		return fmt.Errorf("tcpaotest: segment %s -> %s dropped: %w", s.from, b.local, ErrTimeout)
	}
	return nil
}
