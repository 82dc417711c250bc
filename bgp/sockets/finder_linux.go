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
