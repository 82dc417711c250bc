package sockets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Netlink and inet_diag constants (include/uapi/linux/{netlink,sock_diag,inet_diag}.h).
// They are spelled out here so the encoder and decoder build and fuzz on
// every platform.
const (
	afInet  = 2
	afInet6 = 10

	nlmsgHdrLen   = 16
	nlmsgNoop     = 0x1
	nlmsgError    = 0x2
	nlmsgDone     = 0x3
	nlmFRequest   = 0x1
	nlmFRoot      = 0x100
	nlmFMatch     = 0x200
	nlmFDump      = nlmFRoot | nlmFMatch
	sockDiagByFam = 20
	ipprotoTCP    = 6

	reqV2Len   = 56 // struct inet_diag_req_v2
	sockIDLen  = 48 // struct inet_diag_sockid
	diagMsgLen = 72 // struct inet_diag_msg

	noCookie = ^uint32(0) // INET_DIAG_NOCOOKIE

	rtaHdrLen     = 4            // struct rtattr
	attrMD5Sig    = 18           // INET_DIAG_MD5SIG
	diagMD5SigLen = 100          // struct tcp_diag_md5sig (include/uapi/linux/tcp.h)
	extInfo       = 1 << (2 - 1) // 1 << (INET_DIAG_INFO - 1) in idiag_ext
)

// TCP states as inet_diag reports them (include/net/tcp_states.h).
const (
	StateEstablished uint8 = 1
	StateListen      uint8 = 10
)

// Socket is one TCP socket as sock_diag reports it.
type Socket struct {
	// Family is 2 (AF_INET) or 10 (AF_INET6).
	Family uint8
	State  uint8
	// Local and Remote are the socket's addresses. Remote is the zero
	// address and port for a listener. An AF_INET6 socket talking IPv4
	// reports IPv4-mapped addresses; Unmap them to compare with IPv4.
	Local, Remote netip.AddrPort
	IfIndex       uint32
	Cookie        uint64
	UID           uint32
	Inode         uint64
	// MD5 are the socket's TCP-MD5 keys (INET_DIAG_MD5SIG, which the
	// kernel sends to a CAP_NET_ADMIN reader only): Linux's only way to
	// read them back. Without that capability a socket with keys shows
	// none. Each key is its peer prefix and its password's fingerprint
	// (the bytes are wiped once fingerprinted); sock_diag does not report
	// a key's VRF binding.
	MD5 []tcpao.MD5Info
}

// ErrNotFound is returned when no socket matches a lookup.
var ErrNotFound = errors.New("sockets: no such socket")

// ErrUnsupported is returned off Linux: discovery needs sock_diag and
// pidfd_getfd.
var ErrUnsupported = errors.New("sockets: socket discovery needs Linux")

// ErrNoProcess: the speaker's process is not running (none by that name,
// no process listening on its control socket): it has no sessions, which
// is not a failure to read them.
var ErrNoProcess = errors.New("not running")

// ErrMalformed is returned for a netlink answer that cannot be decoded.
var ErrMalformed = errors.New("sockets: malformed sock_diag message")

// encodeRequest builds one SOCK_DIAG_BY_FAMILY request with the
// extensions ext. With dump set it asks
// for every TCP socket of family in the given states bitmask; otherwise it
// asks for the socket with exactly local and remote (an exact lookup).
func encodeRequest(seq uint32, ext, family uint8, dump bool, states uint32, local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+reqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFam)
	flags := uint16(nlmFRequest)
	if dump {
		flags |= nlmFDump
	}
	ne.PutUint16(b[6:], flags)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHdrLen:]
	r[0] = family
	r[1] = ipprotoTCP
	r[2] = ext
	ne.PutUint32(r[4:], states)
	id := r[8:]
	if !dump {
		binary.BigEndian.PutUint16(id[0:], local.Port())
		binary.BigEndian.PutUint16(id[2:], remote.Port())
		putAddr(id[4:20], family, local.Addr())
		putAddr(id[20:36], family, remote.Addr())
	}
	ne.PutUint32(id[40:], noCookie)
	ne.PutUint32(id[44:], noCookie)
	return b
}

func putAddr(dst []byte, family uint8, a netip.Addr) {
	if family == afInet {
		v4 := a.Unmap().As4()
		copy(dst, v4[:])
		return
	}
	v6 := a.As16()
	copy(dst, v6[:])
}

// parseResult is what one netlink datagram held.
type parseResult struct {
	sockets []Socket
	done    bool
}

// parseMessages decodes one datagram of netlink messages answering request
// seq. An NLMSG_ERROR with a non-zero errno is returned as a wrapped
// syscall.Errno (ENOENT as ErrNotFound too). Messages for other sequence
// numbers are ignored.
func parseMessages(b []byte, seq uint32) (parseResult, error) {
	var res parseResult
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return res, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
		}
		l := ne.Uint32(b[0:])
		typ := ne.Uint16(b[4:])
		mseq := ne.Uint32(b[8:])
		if l < nlmsgHdrLen || uint64(l) > uint64(len(b)) {
			return res, fmt.Errorf("%w: message length %d of %d bytes", ErrMalformed, l, len(b))
		}
		body := b[nlmsgHdrLen:l]
		// Messages are 4-byte aligned (NLMSG_ALIGN).
		adv := (uint64(l) + 3) &^ 3
		if adv > uint64(len(b)) {
			adv = uint64(len(b))
		}
		b = b[adv:]
		if mseq != seq {
			continue
		}
		switch typ {
		case nlmsgNoop:
		case nlmsgDone:
			res.done = true
			return res, nil
		case nlmsgError:
			if len(body) < 4 {
				return res, fmt.Errorf("%w: short NLMSG_ERROR", ErrMalformed)
			}
			errno := -int32(ne.Uint32(body))
			if errno == 0 {
				res.done = true
				return res, nil
			}
			if errno < 0 {
				return res, fmt.Errorf("%w: NLMSG_ERROR with positive code %d", ErrMalformed, -errno)
			}
			e := syscall.Errno(errno)
			if e == syscall.ENOENT {
				return res, fmt.Errorf("sock_diag: %w (%w)", ErrNotFound, e)
			}
			return res, fmt.Errorf("sock_diag: %w", e)
		case sockDiagByFam:
			s, err := decodeDiagMsg(body)
			if err != nil {
				return res, err
			}
			res.sockets = append(res.sockets, s)
		default:
			return res, fmt.Errorf("%w: unexpected message type %d", ErrMalformed, typ)
		}
	}
	return res, nil
}

// decodeDiagMsg decodes struct inet_diag_msg and its INET_DIAG_MD5SIG
// attribute (others are skipped).
func decodeDiagMsg(b []byte) (Socket, error) {
	if len(b) < diagMsgLen {
		return Socket{}, fmt.Errorf("%w: inet_diag_msg of %d bytes (want %d)", ErrMalformed, len(b), diagMsgLen)
	}
	ne := binary.NativeEndian
	s := Socket{Family: b[0], State: b[1]}
	id := b[4 : 4+sockIDLen]
	var n int
	switch s.Family {
	case afInet:
		n = 4
	case afInet6:
		n = 16
	default:
		return Socket{}, fmt.Errorf("%w: address family %d", ErrMalformed, s.Family)
	}
	src, _ := netip.AddrFromSlice(id[4 : 4+n])
	dst, _ := netip.AddrFromSlice(id[20 : 20+n])
	s.Local = netip.AddrPortFrom(src, binary.BigEndian.Uint16(id[0:]))
	s.Remote = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(id[2:]))
	s.IfIndex = ne.Uint32(id[36:])
	s.Cookie = uint64(ne.Uint32(id[40:])) | uint64(ne.Uint32(id[44:]))<<32
	rest := b[4+sockIDLen:]
	s.UID = ne.Uint32(rest[12:])
	s.Inode = uint64(ne.Uint32(rest[16:]))
	for a := b[diagMsgLen:]; len(a) >= rtaHdrLen; {
		l, typ := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
		if l < rtaHdrLen {
			break // padding: the kernel's attributes are never shorter
		}
		if l > len(a) {
			return Socket{}, fmt.Errorf("%w: attribute length %d of %d bytes", ErrMalformed, l, len(a))
		}
		if typ == attrMD5Sig {
			md5, err := decodeMD5Sigs(a[rtaHdrLen:l])
			if err != nil {
				return Socket{}, err
			}
			s.MD5 = md5
		}
		a = a[min((l+3)&^3, len(a)):] // RTA_ALIGN
	}
	return s, nil
}

// decodeMD5Sigs decodes an array of struct tcp_diag_md5sig: family,
// prefixlen, keylen, the address (network order) and the key, which is
// fingerprinted and never kept.
func decodeMD5Sigs(b []byte) ([]tcpao.MD5Info, error) {
	if len(b)%diagMD5SigLen != 0 {
		return nil, fmt.Errorf("%w: INET_DIAG_MD5SIG of %d bytes", ErrMalformed, len(b))
	}
	out := make([]tcpao.MD5Info, 0, len(b)/diagMD5SigLen)
	for ; len(b) > 0; b = b[diagMD5SigLen:] {
		fam, bits, keylen := b[0], int(b[1]), int(binary.NativeEndian.Uint16(b[2:]))
		var a netip.Addr
		switch fam {
		case afInet:
			a = netip.AddrFrom4([4]byte(b[4:8]))
		case afInet6:
			a = netip.AddrFrom16([16]byte(b[4:20]))
		default:
			return nil, fmt.Errorf("%w: MD5 key of address family %d", ErrMalformed, fam)
		}
		if bits > a.BitLen() || keylen > tcpao.MaxMD5KeyLen {
			return nil, fmt.Errorf("%w: MD5 key of prefix length %d", ErrMalformed, bits)
		}
		sec := tcpao.NewSecret(b[20 : 20+keylen])
		out = append(out, tcpao.MD5Info{MD5Ref: tcpao.MD5Ref{Peer: netip.PrefixFrom(a, bits)}, Fingerprint: sec.Fingerprint()})
		sec.Zero()
	}
	return out, nil
}

// Ref names one socket of one process. It is what discovery hands out and
// what WithSocket takes.
type Ref struct {
	PID    int
	Inode  uint64
	Cookie uint64
	// FD is the descriptor number in process PID where the socket was
	// found; WithSocket re-resolves it when it no longer names the socket.
	FD            int
	Local, Remote netip.AddrPort
	Listening     bool
	// BoundDev is the ifindex of the device the socket is bound to
	// (SO_BINDTODEVICE; a VRF's l3mdev for a speaker's per-VRF listener
	// and the sessions it accepts), 0 when unbound. Two VRFs may hold
	// listeners on the same address and port: this tells them apart.
	BoundDev int
}

// refOf is the Ref of socket s, found at descriptor fd of process pid.
func refOf(pid, fd int, s Socket, listening bool) Ref {
	return Ref{PID: pid, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote, Listening: listening, BoundDev: int(s.IfIndex)}
}

func (r Ref) String() string {
	kind := "established " + r.Local.String() + "<->" + r.Remote.String()
	if r.Listening {
		kind = "listener " + r.Local.String()
	}
	if r.BoundDev != 0 {
		kind += fmt.Sprintf(" dev %d", r.BoundDev)
	}
	return fmt.Sprintf("pid %d fd %d inode %d cookie %d %s", r.PID, r.FD, r.Inode, r.Cookie, kind)
}

// ErrStale is returned by WithSocket when the process or the socket named by
// a Ref is gone or replaced (other inode or cookie): discover again.
var ErrStale = errors.New("sockets: socket reference is stale")

// isExact reports whether s, the kernel's answer to an exact request, is
// the connection local<->remote. The kernel's exact lookup is the
// receive path's (inet6_lookup): it matches the request's interface (0)
// against a socket's bound device, and a connection over an IPv6
// link-local address is bound to its link, so for one the kernel answers
// with the listener the connection's SYN would have reached (an interface
// neighbour's session, BGP unnumbered: the listener was taken for the
// session, and its TCP_AO_INFO writes failed with EINVAL). Such an answer
// is not the connection: the dump finds it (scan).
func isExact(s Socket, local, remote netip.AddrPort) bool {
	same := func(a, b netip.AddrPort) bool {
		return a.Port() == b.Port() && a.Addr().Unmap().WithZone("") == b.Addr().Unmap().WithZone("")
	}
	return s.State != StateListen && same(s.Local, local) && same(s.Remote, remote)
}
