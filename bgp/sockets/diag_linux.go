//go:build linux

package sockets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/internal/netns"
	"golang.org/x/sys/unix"
)

// Diag is a NETLINK_SOCK_DIAG socket bound to one network namespace. It is
// not safe for concurrent use.
type Diag struct {
	// MD5 asks the kernel for each socket's TCP-MD5 keys (Socket.MD5). It
	// sends them only with INET_DIAG_INFO (struct tcp_info, some 250
	// bytes a socket more), so readers that need no keys leave it unset.
	MD5 bool
	fd  int
	seq uint32
	buf []byte
}

// OpenDiag opens a sock_diag socket in the network namespace of process pid
// (pid 0: the caller's own). A netlink socket stays in the namespace it was
// created in, so the thread goes back to its own namespace at once.
func OpenDiag(pid int) (*Diag, error) {
	var fd int
	err := netns.Do(pid, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			return fmt.Errorf("socket(NETLINK_SOCK_DIAG): %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sock_diag SO_RCVTIMEO: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind sock_diag: %w", err)
	}
	return &Diag{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close releases the netlink socket.
func (d *Diag) Close() error { return unix.Close(d.fd) }

// Listeners dumps the listening TCP sockets of both address families.
func (d *Diag) Listeners() ([]Socket, error) { return d.dump(StateListen) }

// EstablishedSockets dumps the established TCP sockets of both families.
func (d *Diag) EstablishedSockets() ([]Socket, error) { return d.dump(StateEstablished) }

func (d *Diag) dump(state uint8) ([]Socket, error) {
	var all []Socket
	for _, fam := range []uint8{afInet, afInet6} {
		s, err := d.query(encodeRequest(d.next(), d.ext(), fam, true, 1<<state, netip.AddrPort{}, netip.AddrPort{}), true)
		if err != nil {
			return nil, fmt.Errorf("sock_diag dump state %d family %d: %w", state, fam, err)
		}
		all = append(all, s...)
	}
	return all, nil
}

// Lookup finds the TCP socket with exactly this local and remote address
// (any state). IPv4 addresses are looked up as AF_INET and then as
// IPv4-mapped AF_INET6 (a dual-stack socket). ErrNotFound if there is none.
func (d *Diag) Lookup(local, remote netip.AddrPort) (Socket, error) {
	fams := []uint8{afInet6}
	if local.Addr().Unmap().Is4() && remote.Addr().Unmap().Is4() {
		fams = []uint8{afInet, afInet6}
	}
	var err error
	for _, fam := range fams {
		l, r := local, remote
		if fam == afInet6 {
			l = netip.AddrPortFrom(netip.AddrFrom16(l.Addr().As16()), l.Port())
			r = netip.AddrPortFrom(netip.AddrFrom16(r.Addr().As16()), r.Port())
		}
		var s []Socket
		s, err = d.query(encodeRequest(d.next(), d.ext(), fam, false, ^uint32(0), l, r), false)
		if err == nil && len(s) > 0 && isExact(s[0], local, remote) {
			return s[0], nil
		}
		if err == nil {
			err = ErrNotFound
		}
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	if errors.Is(err, ErrNotFound) {
		// The exact lookup matches the request's interface (0) against
		// the socket's bound device: a socket bound to a device, as bgpd
		// binds a VRF's sockets to the VRF, is not found by it. A dump
		// lists it.
		var s Socket
		if s, err = d.scan(fams, local, remote); err == nil {
			return s, nil
		}
	}
	return Socket{}, fmt.Errorf("sock_diag lookup %s<->%s: %w", local, remote, err)
}

// Listener finds the listening socket at local whose cookie is cookie:
// first with an exact request, whose answer the kernel sizes to the
// socket, its TCP-MD5 keys with it (a dump's datagrams hold a page at
// first and 32 KiB at most, and a dump ends at a listener whose keys do
// not fit: a route server's listener with 200 MD5 peers was missing from
// every dump); then, when that finds no such listener (one bound to a
// device, which the exact request does not find), in a dump of the
// listeners. ErrNotFound when neither has it.
func (d *Diag) Listener(local netip.AddrPort, cookie uint64) (Socket, error) {
	fams := []uint8{afInet6}
	if local.Addr().Unmap().Is4() {
		fams = []uint8{afInet, afInet6}
	}
	for _, fam := range fams {
		l, unspec := local, netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		if fam == afInet6 {
			l = netip.AddrPortFrom(netip.AddrFrom16(l.Addr().As16()), l.Port())
			unspec = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		}
		s, err := d.query(encodeRequest(d.next(), d.ext(), fam, false, 1<<StateListen, l, unspec), false)
		if err == nil && len(s) > 0 && s[0].Cookie == cookie {
			return s[0], nil
		}
	}
	ls, err := d.Listeners()
	if err != nil {
		return Socket{}, err
	}
	for _, s := range ls {
		if s.Cookie == cookie {
			return s, nil
		}
	}
	return Socket{}, fmt.Errorf("sock_diag listener %s cookie %d: %w", local, cookie, ErrNotFound)
}

// scan dumps the TCP sockets of fams in every state and returns the one
// with exactly local and remote (isExact: IPv4-mapped addresses compared unmapped, zones aside).
func (d *Diag) scan(fams []uint8, local, remote netip.AddrPort) (Socket, error) {
	for _, fam := range fams {
		all, err := d.query(encodeRequest(d.next(), d.ext(), fam, true, ^uint32(0), netip.AddrPort{}, netip.AddrPort{}), true)
		if err != nil {
			return Socket{}, err
		}
		for _, s := range all {
			if isExact(s, local, remote) {
				return s, nil
			}
		}
	}
	return Socket{}, ErrNotFound
}

func (d *Diag) next() uint32 { d.seq++; return d.seq }

// ext is the request's idiag_ext: INET_DIAG_INFO when MD5 keys are asked
// for (tcp_diag_get_aux runs only with it).
func (d *Diag) ext() uint8 {
	if d.MD5 {
		return extInfo
	}
	return 0
}

func (d *Diag) query(req []byte, dump bool) ([]Socket, error) {
	seq := nativeSeq(req)
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	var out []Socket
	for {
		n, _, err := unix.Recvfrom(d.fd, d.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, fmt.Errorf("recv: %w", err)
		}
		res, err := parseMessages(d.buf[:n], seq)
		clear(d.buf[:n]) // it may hold TCP-MD5 passwords (INET_DIAG_MD5SIG)
		if err != nil {
			return nil, err
		}
		out = append(out, res.sockets...)
		// An exact lookup answers with one message and no NLMSG_DONE.
		if res.done || (!dump && len(out) > 0) {
			return out, nil
		}
	}
}

func nativeSeq(req []byte) uint32 { return binary.NativeEndian.Uint32(req[8:]) }
