//go:build linux

package sockets

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Finder discovers the TCP sockets of one process.
type Finder struct {
	// PID is the process whose sockets are wanted (the BGP speaker).
	PID int
}

// Listeners returns the process's listening TCP sockets on port (0: any
// port), both address families, as Refs with their descriptor numbers.
//
// A Multipath TCP listener (Go 1.24 and later listen so by default where
// the kernel has CONFIG_MPTCP) is never reported as no listener: when the
// dump lists a listener on the port that none of the process's
// descriptors is, and so no Ref was found, the process's descriptors are
// looked through for an MPTCP listener on the port, answered as an
// *MPTCPError (tcpao.ErrMPTCP). A kernel that lists the subflow under the
// descriptor's inode (6.18 does) gives a Ref as for TCP, and the keys
// then fail with tcpao.ErrMPTCP. A found TCP listener costs nothing more.
func (f Finder) Listeners(port uint16) ([]Ref, error) {
	return f.listeners((*Diag).Listeners, port)
}

// listeners is Listeners reading the listener dump with dump (a test
// lists a socket no descriptor is, as a kernel that gives an MPTCP
// listener's subflow an inode of its own does).
func (f Finder) listeners(dump func(*Diag) ([]Socket, error), port uint16) ([]Ref, error) {
	refs, unowned, err := f.owned(dump, func(s Socket) bool { return port == 0 || s.Local.Port() == port }, true)
	if err != nil || len(refs) > 0 || unowned == 0 {
		return refs, err
	}
	if err := mptcpListener(f.PID, port); errors.As(err, new(*MPTCPError)) {
		return nil, err
	}
	return nil, nil
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
	return refOf(f.PID, fd, s, false), nil
}

// Connections returns the process's established sockets whose remote
// address is neighbor (IPv4-mapped addresses match IPv4), for when the
// ports of a session are not known.
func (f Finder) Connections(neighbor netip.Addr) ([]Ref, error) {
	refs, _, err := f.owned((*Diag).EstablishedSockets, func(s Socket) bool { return s.Remote.Addr().Unmap() == neighbor.Unmap() }, false)
	return refs, err
}

// ConnectionsTo is Connections for every address in neighbors at once: one
// sock_diag dump and one search of the process's descriptors, however many
// neighbors (a route server's thousand BGP sessions read one by one cost a
// dump and a descriptor search each: O(N^2) a pass). Each neighbor with a
// socket has its Refs under its unmapped address.
func (f Finder) ConnectionsTo(neighbors map[netip.Addr]bool) (map[netip.Addr][]Ref, error) {
	refs, _, err := f.owned((*Diag).EstablishedSockets, func(s Socket) bool { return neighbors[s.Remote.Addr().Unmap()] }, false)
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Addr][]Ref, len(neighbors))
	for _, r := range refs {
		a := r.Remote.Addr().Unmap()
		out[a] = append(out[a], r)
	}
	return out, nil
}

// owned lists sockets with list, keeps those that match keep and that the
// process holds a descriptor for (others in its namespace belong to other
// processes), and returns them as Refs, with how many matched keep and
// were not the process's.
func (f Finder) owned(list func(*Diag) ([]Socket, error), keep func(Socket) bool, listening bool) (_ []Ref, unowned int, _ error) {
	d, err := OpenDiag(f.PID)
	if err != nil {
		return nil, 0, err
	}
	defer d.Close()
	socks, err := list(d)
	if err != nil {
		return nil, 0, err
	}
	var kept []Socket
	var inodes []uint64
	for _, s := range socks {
		if keep(s) {
			kept = append(kept, s)
			inodes = append(inodes, s.Inode)
		}
	}
	// A speaker opens its listeners first (low descriptor numbers) and
	// its sessions after them.
	fds, _, err := findFDs(f.PID, inodes, !listening)
	if err != nil {
		return nil, 0, err
	}
	var out []Ref
	for _, s := range kept {
		if fd, ok := fds[s.Inode]; ok {
			out = append(out, refOf(f.PID, fd, s, listening))
		}
	}
	return out, len(kept) - len(out), nil
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

// ConnectionsTo is Finder{PID: pid}.ConnectionsTo(neighbors).
func (System) ConnectionsTo(pid int, neighbors map[netip.Addr]bool) (map[netip.Addr][]Ref, error) {
	return Finder{PID: pid}.ConnectionsTo(neighbors)
}

// With is WithSocket(ref, fn).
func (System) With(ref Ref, fn func(fd int) error) error { return WithSocket(ref, fn) }

// ListenerInodes is ListenerInodes(pid, port).
func (System) ListenerInodes(pid int, port uint16) ([]uint64, error) {
	return ListenerInodes(pid, port)
}

// ListenerInodes returns the inodes, sorted, of the listening TCP sockets
// on port (both address families) in the network namespace of process pid
// (0: the caller's own), whichever process holds them. It is one
// sock_diag dump and reads no process's descriptors, so it stays cheap
// however many sessions the speaker has: a watch polls it to notice a new
// listener (a speaker restarted, or its BGP instance configured late),
// which has no keys until aokeyd finds it.
func ListenerInodes(pid int, port uint16) ([]uint64, error) {
	d, err := OpenDiag(pid)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	socks, err := d.Listeners()
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, s := range socks {
		if s.Local.Port() == port {
			out = append(out, s.Inode)
		}
	}
	slices.Sort(out)
	return out, nil
}

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
