//go:build linux

package sockets

import (
	"fmt"
	"net/netip"
)

// Finder discovers the TCP sockets of one process.
type Finder struct {
	// PID is the process whose sockets are wanted (the BGP speaker).
	PID int
}

// Listeners returns the process's listening TCP sockets on port (0: any
// port), both address families, as Refs with their descriptor numbers.
func (f Finder) Listeners(port uint16) ([]Ref, error) {
	d, err := OpenDiag(f.PID)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	socks, err := d.Listeners()
	if err != nil {
		return nil, err
	}
	fds, err := FDTable(f.PID)
	if err != nil {
		return nil, err
	}
	var out []Ref
	for _, s := range socks {
		if port != 0 && s.Local.Port() != port {
			continue
		}
		fd, ok := fds[s.Inode]
		if !ok {
			continue // another process's listener in the same namespace
		}
		out = append(out, Ref{PID: f.PID, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote, Listening: true})
	}
	return out, nil
}

// Established returns the process's socket with exactly this local and
// remote address. ErrNotFound: no such socket in the process's namespace;
// ErrStale: it exists but the process holds no descriptor for it.
func (f Finder) Established(local, remote netip.AddrPort) (Ref, error) {
	d, err := OpenDiag(f.PID)
	if err != nil {
		return Ref{}, err
	}
	defer d.Close()
	s, err := d.Lookup(local, remote)
	if err != nil {
		return Ref{}, err
	}
	fd, err := FindFD(f.PID, s.Inode)
	if err != nil {
		return Ref{}, fmt.Errorf("socket %s<->%s: %w", local, remote, err)
	}
	return Ref{PID: f.PID, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote}, nil
}

// Connections returns the process's established sockets whose remote
// address is neighbor (IPv4-mapped addresses match IPv4), for when the
// ports of a session are not known.
func (f Finder) Connections(neighbor netip.Addr) ([]Ref, error) {
	d, err := OpenDiag(f.PID)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	socks, err := d.EstablishedSockets()
	if err != nil {
		return nil, err
	}
	fds, err := FDTable(f.PID)
	if err != nil {
		return nil, err
	}
	var out []Ref
	for _, s := range socks {
		if s.Remote.Addr().Unmap() != neighbor.Unmap() {
			continue
		}
		if fd, ok := fds[s.Inode]; ok {
			out = append(out, Ref{PID: f.PID, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote})
		}
	}
	return out, nil
}

// System is socket discovery on this machine, for consumers that declare
// their own interface over it (bgp.Discoverer).
type System struct{}

// Listeners is Finder{PID: pid}.Listeners(port).
func (System) Listeners(pid int, port uint16) ([]Ref, error) { return Finder{PID: pid}.Listeners(port) }

// Established is Finder{PID: pid}.Established(local, remote).
func (System) Established(pid int, local, remote netip.AddrPort) (Ref, error) {
	return Finder{PID: pid}.Established(local, remote)
}

// Connections is Finder{PID: pid}.Connections(neighbor).
func (System) Connections(pid int, neighbor netip.Addr) ([]Ref, error) {
	return Finder{PID: pid}.Connections(neighbor)
}

// With is WithSocket(ref, fn).
func (System) With(ref Ref, fn func(fd int) error) error { return WithSocket(ref, fn) }

// ListenerOwner returns the pid of the process that holds a listening TCP
// socket on port in the caller's network namespace (the BGP speaker when no
// pid is configured).
func ListenerOwner(port uint16) (int, error) {
	d, err := OpenDiag(0)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	socks, err := d.Listeners()
	if err != nil {
		return 0, err
	}
	for _, s := range socks {
		if s.Local.Port() == port {
			pid, _, err := FindOwner(s.Inode)
			return pid, err
		}
	}
	return 0, fmt.Errorf("no TCP listener on port %d: %w", port, ErrNotFound)
}
