package tcpaotest

import (
	"fmt"

	"github.com/aokeyd/aokeyd/tcpao"
)

// keepalive is a socket's TCP keepalive settings: off, with Linux's
// defaults (net.ipv4.tcp_keepalive_time, _intvl, _probes), until set.
type keepalive struct {
	set               bool // any of them set (else the defaults)
	on                bool
	idle, intvl, cnts int
}

func (k keepalive) values() (idle, intvl, cnt int) {
	if !k.set {
		return 7200, 75, 9
	}
	return k.idle, k.intvl, k.cnts
}

var _ tcpao.PeerProber = (*Sock)(nil)

// ArmPeerProbe is tcpao.PeerProber: on an established connection whose
// keepalive is off, the probe goes out at once (the in-memory kernel has
// no clock: the connection counts as idle) signed with the socket's
// Current_key and carrying its RNext_key, and the other end's answer,
// signed with its Current_key as the probe's RNextKeyID left it, comes
// back (the conformance case ao/keepalive-probe-brings-the-peers-switch
// holds the real kernel to the same). On a socket whose keepalive is on,
// only its idle time changes.
func (s *Sock) ArmPeerProbe() (tcpao.PeerProbe, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.state == stateGone {
		return tcpao.PeerProbe{}, fmt.Errorf("tcpaotest: keepalive probe: %w", eBADF)
	}
	idle, intvl, cnt := s.keepalive.values()
	p := tcpao.PeerProbe{Armed: true, OwnerKeepalive: s.keepalive.on, Idle: idle, Interval: intvl, Count: cnt}
	if p.OwnerKeepalive {
		s.keepalive.idle = 1
	} else {
		s.keepalive = keepalive{set: true, on: true, idle: 1, intvl: 32767, cnts: 127}
	}
	if r := s.remote; s.state == stateEstablished && r != nil && r.state == stateEstablished {
		if r.receiveEstablished(s.local.Addr(), s.sign()) {
			s.receiveEstablished(r.local.Addr(), r.sign())
		}
	}
	return p, nil
}

// EndPeerProbe is tcpao.PeerProber: keepalive off, the settings found put
// back.
func (s *Sock) EndPeerProbe(p tcpao.PeerProbe) error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.state == stateGone {
		return fmt.Errorf("tcpaotest: keepalive probe's end: %w", eBADF)
	}
	if p.OwnerKeepalive {
		s.keepalive.idle = p.Idle
		return nil
	}
	s.keepalive = keepalive{set: true, idle: p.Idle, intvl: p.Interval, cnts: p.Count}
	return nil
}

// Keepalive reports the socket's SO_KEEPALIVE and TCP_KEEPIDLE,
// TCP_KEEPINTVL and TCP_KEEPCNT (tests: a probe's end puts them back).
func (s *Sock) Keepalive() (on bool, idle, intvl, cnt int) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	idle, intvl, cnt = s.keepalive.values()
	return s.keepalive.on, idle, intvl, cnt
}

// SetKeepalive turns SO_KEEPALIVE on or off as the socket's owner would
// (tests: an owner's keepalive keeps its settings across a probe).
func (s *Sock) SetKeepalive(on bool) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	idle, intvl, cnt := s.keepalive.values()
	s.keepalive = keepalive{set: true, on: on, idle: idle, intvl: intvl, cnts: cnt}
}
