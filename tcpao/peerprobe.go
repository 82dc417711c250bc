package tcpao

import "errors"

// ErrNoPeerProbe: the Socket cannot have a keepalive probe sent (not a
// PeerProber: a wrapper that does not pass it through, or not Linux).
var ErrNoPeerProbe = errors.New("tcpao: the socket cannot send a keepalive probe")

// PeerProbe is what ArmPeerProbe changed on a socket: the TCP keepalive
// settings it found there, which EndPeerProbe puts back. The zero value
// changed nothing (Armed false).
type PeerProbe struct {
	// Armed: the probe was armed and the settings below are the ones
	// found; false when nothing could be armed.
	Armed bool
	// OwnerKeepalive: SO_KEEPALIVE was on (the socket owner's: Go's
	// net package turns it on for every TCP connection, gobgpd's too).
	// Only TCP_KEEPIDLE was changed, and only it is put back.
	OwnerKeepalive bool
	// Idle, Interval and Count are TCP_KEEPIDLE, TCP_KEEPINTVL and
	// TCP_KEEPCNT as found (seconds, seconds, probes).
	Idle, Interval, Count int
}

// PeerProber is a Socket whose kernel can be asked to send its peer one
// TCP keepalive probe: a segment with the sequence number just below the
// peer's window, which the peer's kernel answers at once with an ACK (RFC
// 9293 3.8.4). On an established TCP-AO connection the probe carries the
// socket's Current_key and RNext_key like every segment, and the answer is
// signed with the peer's Current_key, which the peer's kernel has just set
// to the key the probe's RNextKeyID names, when it has it (RFC 5925 7.5.2).
// So a key roll that waits for the peer's next segment need not wait for
// the peer's next BGP keepalive (a minute apart by default, seconds on a
// route server): one probe brings it. The conformance case
// ao/keepalive-probe-brings-the-peers-switch pins this on the kernels.
//
// Invariants:
//   - On a socket without keepalive, an armed probe is one probe:
//     TCP_KEEPIDLE is 1 s (the kernel sends it once the connection has
//     been idle that long, at once if it has), TCP_KEEPINTVL the longest
//     the kernel takes (32,767 s) and TCP_KEEPCNT the most probes (127),
//     so the keepalive neither probes again within hours nor ever closes
//     a connection whose BGP hold timer would not have. EndPeerProbe
//     turns SO_KEEPALIVE off and puts back the three settings found; a
//     probe left armed (aokeyd killed) sends one probe per nine hours and
//     nothing else.
//   - On a socket whose owner turned SO_KEEPALIVE on, only TCP_KEEPIDLE
//     changes (to 1 s: the owner's next probe comes early), and
//     EndPeerProbe puts the owner's back, which re-arms the owner's
//     timer from the last segment received: its cadence is the owner's
//     again, and its interval and count were never changed.
type PeerProber interface {
	ArmPeerProbe() (PeerProbe, error)
	EndPeerProbe(PeerProbe) error
}

// The settings of an armed probe (PeerProber's invariants); the kernel's
// maxima are MAX_TCP_KEEPINTVL and MAX_TCP_KEEPCNT (include/net/tcp.h).
const (
	probeIdle     = 1
	probeInterval = 32767
	probeCount    = 127
)

// ArmPeerProbe arms one keepalive probe on s (PeerProber), or answers
// ErrNoPeerProbe.
func ArmPeerProbe(s Socket) (PeerProbe, error) {
	if p, ok := s.(PeerProber); ok {
		return p.ArmPeerProbe()
	}
	return PeerProbe{}, ErrNoPeerProbe
}

// EndPeerProbe puts back what ArmPeerProbe changed on s; a probe that was
// not armed changed nothing and needs nothing.
func EndPeerProbe(s Socket, p PeerProbe) error {
	if !p.Armed {
		return nil
	}
	if pr, ok := s.(PeerProber); ok {
		return pr.EndPeerProbe(p)
	}
	return ErrNoPeerProbe
}
