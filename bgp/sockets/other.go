//go:build !linux

package sockets

import "net/netip"

// Finder discovers the TCP sockets of one process (Linux only).
type Finder struct{ PID int }

// Listeners is unsupported off Linux.
func (Finder) Listeners(uint16) ([]Ref, error) { return nil, ErrUnsupported }

// Established is unsupported off Linux.
func (Finder) Established(netip.AddrPort, netip.AddrPort) (Ref, error) {
	return Ref{}, ErrUnsupported
}

// WithSocket is unsupported off Linux.
func WithSocket(Ref, func(fd int) error) error { return ErrUnsupported }

// FindOwner is unsupported off Linux.
func FindOwner(uint64) (int, int, error) { return 0, 0, ErrUnsupported }

// Connections is unsupported off Linux.
func (Finder) Connections(netip.Addr) ([]Ref, error) { return nil, ErrUnsupported }

// System is socket discovery on this machine (Linux only).
type System struct{}

// Listeners is unsupported off Linux.
func (System) Listeners(int, uint16) ([]Ref, error) { return nil, ErrUnsupported }

// Established is unsupported off Linux.
func (System) Established(int, netip.AddrPort, netip.AddrPort) (Ref, error) {
	return Ref{}, ErrUnsupported
}

// Connections is unsupported off Linux.
func (System) Connections(int, netip.Addr) ([]Ref, error) { return nil, ErrUnsupported }

// ConnectionsTo is unsupported off Linux.
func (System) ConnectionsTo(int, map[netip.Addr]bool) (map[netip.Addr][]Ref, error) {
	return nil, ErrUnsupported
}

// With is unsupported off Linux.
func (System) With(Ref, func(fd int) error) error { return ErrUnsupported }

// ListenerInodes is unsupported off Linux.
func (System) ListenerInodes(int, uint16) ([]uint64, error) { return nil, ErrUnsupported }

// ListenerInodes is unsupported off Linux.
func ListenerInodes(int, uint16) ([]uint64, error) { return nil, ErrUnsupported }

// Comm is "" off Linux.
func Comm(int) string { return "" }

// ListenerOwner is unsupported off Linux.
func ListenerOwner(uint16) (int, error) { return 0, ErrUnsupported }

// UnixListenerOwner is unsupported off Linux.
func UnixListenerOwner(string) (int, error) { return 0, ErrUnsupported }
