package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

// SessionState is the BGP FSM state of a peer (RFC 4271 section 8). One
// byte: PeerInfo holds it within 128 bytes.
type SessionState int8

// The FSM states. StateUnknown is what a speaker reports it cannot map.
const (
	StateUnknown SessionState = iota
	StateIdle
	StateConnect
	StateActive
	StateOpenSent
	StateOpenConfirm
	StateEstablished
)

var stateNames = [...]string{"unknown", "idle", "connect", "active", "opensent", "openconfirm", "established"}

// ParseSessionState reads a speaker's own name of an FSM state ("Established",
// "OpenSent", "idle"), case-insensitively; anything else is StateUnknown.
// Status and the fleet document speak only String's names, whatever the
// speaker.
func ParseSessionState(name string) SessionState {
	for i, n := range stateNames {
		if strings.EqualFold(n, name) {
			return SessionState(i)
		}
	}
	return StateUnknown
}

func (s SessionState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return stateNames[s]
}

// AdminState is the operator's state of a peer. One byte, as
// SessionState.
type AdminState int8

// Admin states.
const (
	AdminUp AdminState = iota
	AdminDown
	// AdminPrefixLimit: shut down because the prefix limit was exceeded.
	AdminPrefixLimit
)

func (a AdminState) String() string {
	switch a {
	case AdminUp:
		return "up"
	case AdminDown:
		return "down"
	case AdminPrefixLimit:
		return "prefix-limit"
	}
	return fmt.Sprintf("admin(%d)", int(a))
}

// PeerInfo is one neighbor of the speaker. It carries no speaker-specific
// types and no secrets. Its fields are ordered to keep it at 128 bytes:
// the session guard's cache holds one per peer in a map, whose values
// past 128 bytes cost an allocation each.
type PeerInfo struct {
	// Neighbor is the peer's address. For an interface neighbour (Link
	// set) it is the address learned on the link, invalid until the
	// speaker learned one, and it may change between two reports: it is
	// not the peer's identity (Key).
	Neighbor netip.Addr
	// VRF is the speaker's VRF of the neighbor, "" for the default.
	VRF string
	// Link is the interface of an interface neighbour (FRR's `neighbor
	// swp1 interface`), the zero Link for a neighbor configured by
	// address.
	Link peer.Link
	// Local is the local address of the session (or the configured one).
	Local netip.Addr
	// LocalPort and RemotePort are the live ports of the connection, 0
	// when unknown (not established, or a listing that reports the
	// configured ports only).
	LocalPort, RemotePort uint16
	// Flops counts how often the session went down from Established.
	Flops uint32
	State SessionState
	Admin AdminState
	// Uptime is when the session last became Established (zero: never).
	// GoBGP reports it with one-second resolution.
	Uptime time.Time
	// Partial marks a report that does not give Uptime and Flops (they
	// are zero whatever the session's are): GoBGP's peer-state events
	// carry the state, addresses and ports only, its ListPeer all of
	// them. The session guard compares Uptime and Flops only between
	// reports that give them.
	Partial bool
	// Passive: the speaker never opens the connection itself.
	Passive bool
	// MD5 is set when the neighbor is configured with a TCP-MD5 password.
	// The password itself never leaves the speaker package.
	MD5     bool
	PeerASN uint32
	// About is what the speaker says of the neighbor for people (nil:
	// nothing): aoctl status shows it; the session guard and the change
	// watchers compare none of it.
	About *PeerAbout
}

// PeerAbout is what a speaker reports of a neighbor for people, as its
// own CLI shows it (gobgp neighbor, FRR's show bgp neighbors).
type PeerAbout struct {
	// Description is the neighbor's description in the speaker's
	// configuration ("": none).
	Description string
	// LastDown is when the session last went down (zero: never, or not
	// reported), LastDownReason why in the speaker's words ("": not
	// reported; GoBGP says when, not why).
	LastDown       time.Time
	LastDownReason string
}

// Description is the neighbor's description ("" without one).
func (p PeerInfo) Description() string {
	if p.About == nil {
		return ""
	}
	return p.About.Description
}

// LastDown is when and why the session last went down, as far as the
// speaker reports it.
func (p PeerInfo) LastDown() (time.Time, string) {
	if p.About == nil {
		return time.Time{}, ""
	}
	return p.About.LastDown, p.About.LastDownReason
}

// Key is the peer's identity: its address and VRF, or an interface
// neighbour's link and VRF (its address aside).
func (p PeerInfo) Key() peer.Key {
	if p.Link.IsValid() {
		return peer.Key{Link: p.Link, VRF: p.VRF}
	}
	return peer.KeyOf(p.Neighbor, p.VRF)
}

// Shown is the peer for people: Key's text, an interface neighbour's with
// the address it peers with ("swp1 (fe80::1)").
func (p PeerInfo) Shown() string { return p.Key().Shown(p.Neighbor) }

// Established reports whether the session is up.
func (p PeerInfo) Established() bool { return p.State == StateEstablished }

// LocalAddrPort is the local end of the connection.
func (p PeerInfo) LocalAddrPort() netip.AddrPort { return netip.AddrPortFrom(p.Local, p.LocalPort) }

// RemoteAddrPort is the neighbor's end of the connection.
func (p PeerInfo) RemoteAddrPort() netip.AddrPort {
	return netip.AddrPortFrom(p.Neighbor, p.RemotePort)
}

// LogValue identifies the peer in logs.
func (p PeerInfo) LogValue() slog.Value {
	name := p.Neighbor.String()
	if p.Link.IsValid() {
		name = peer.Key{Link: p.Link}.Shown(p.Neighbor) // "swp1 (fe80::1)"
	}
	return slog.GroupValue(
		slog.String("neighbor", name),
		slog.String("vrf", p.VRF),
		slog.String("state", p.State.String()),
		slog.Uint64("flops", uint64(p.Flops)),
	)
}

// EventKind says what an Event carries.
type EventKind int

const (
	// EventSync carries the full peer list in Peers: the first event of a
	// watch, and the first after the speaker's event stream was
	// re-established. Consumers reconcile against it (events may have
	// been missed in between).
	EventSync EventKind = iota + 1
	// EventState carries one peer whose session state changed, with the
	// live local and remote ports of its connection.
	EventState
	// EventLost says the speaker's event stream broke: events may be
	// missed until the EventSync that follows its reconnect, so nothing
	// known from the stream may be vouched for until then.
	EventLost
)

// Event is what Speaker.Watch delivers.
type Event struct {
	Kind  EventKind
	Peer  PeerInfo
	Peers []PeerInfo
}

// SendEvent delivers ev on ch for a speaker adapter's Watch, or gives up
// when ctx ends first; it reports whether ev was delivered.
func SendEvent(ctx context.Context, ch chan<- Event, ev Event) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// Speaker is a BGP daemon seen from aokeyd (bgp/gobgp, bgp/frr).
// Implementations keep their own types out of it; a peer is a peer.Key
// (address and VRF) in both directions.
type Speaker interface {
	// Name describes the speaker for logs and status.
	Name() string
	// Peers lists the configured neighbors.
	Peers(ctx context.Context) ([]PeerInfo, error)
	// Peer reads one neighbor, asking the speaker about it alone (the
	// session tracker asks when it cannot vouch for a session around a
	// rotation step, so its cost must not grow with the number of
	// neighbors): the neighbor at k.Addr in
	// VRF k.VRF ("" the default one), nothing else. An error wrapping
	// ErrNoPeer when there is no such neighbor.
	Peer(ctx context.Context, k peer.Key) (PeerInfo, error)
	// Watch delivers events until ctx ends, then closes the channel. It
	// starts with an EventSync and reconnects by itself when the
	// speaker's stream breaks: an EventLost at once, then (after backoff)
	// another EventSync.
	Watch(ctx context.Context) (<-chan Event, error)
	// ResetPeer closes the session with the peer k (a hard reset) and
	// says why in the BGP Cease notification.
	ResetPeer(ctx context.Context, k peer.Key, reason string) error
	// PID is the process id of the speaker, whose sockets are discovered.
	PID(ctx context.Context) (int, error)
}
