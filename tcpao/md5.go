package tcpao

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
)

// MaxMD5KeyLen is TCP_MD5SIG_MAXKEYLEN (include/uapi/linux/tcp.h).
const MaxMD5KeyLen = 80

// ErrNoMD5 is returned by MD5 for a Socket that cannot carry TCP-MD5 keys
// (a wrapper that does not pass them through).
var ErrNoMD5 = errors.New("tcpao: this socket does not take TCP-MD5 keys")

// MD5Ref names one TCP-MD5 (RFC 2385) key on a socket the way the kernel
// matches it for a delete: peer prefix and L3 ifindex (0: no
// TCP_MD5SIG_FLAG_IFINDEX, the key applies in every VRF).
type MD5Ref struct {
	Peer    netip.Prefix
	IfIndex int
}

func (r MD5Ref) String() string {
	s := "md5 " + r.Peer.String()
	if r.IfIndex != 0 {
		s += fmt.Sprintf(" ifindex=%d", r.IfIndex)
	}
	return s
}

// MD5Info is one installed TCP-MD5 key as it can be read back (sock_diag
// on Linux): its reference and its password's fingerprint. sock_diag does
// not report a key's VRF binding: IfIndex is then 0.
type MD5Info struct {
	MD5Ref
	Fingerprint Fingerprint
}

// MD5Key is one TCP-MD5 key as setsockopt(TCP_MD5SIG_EXT) installs it. A
// peer has at most one: adding a key for the same prefix and ifindex
// replaces the password in place (the kernel keeps one key per address).
type MD5Key struct {
	MD5Ref
	Secret Secret
}

func (k MD5Key) String() string { return k.MD5Ref.String() }

// LogValue prints the key's reference only.
func (k MD5Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("peer", k.Peer.String()), slog.Int("ifindex", k.IfIndex))
}

// Validate checks what the kernel would refuse, before any system call.
func (k MD5Key) Validate() error {
	if n := k.Secret.Len(); n == 0 || n > MaxMD5KeyLen {
		return fmt.Errorf("%w: a TCP-MD5 password wants 1..%d bytes", ErrKeyLength, MaxMD5KeyLen)
	}
	if !k.Peer.IsValid() {
		return fmt.Errorf("%w: %v", ErrAddress, k.Peer)
	}
	return nil
}

// MD5Socket is the TCP-MD5 side of a socket: setsockopt(TCP_MD5SIG_EXT).
// Linux has no call that reads MD5 keys back from a socket (sock_diag's
// INET_DIAG_MD5SIG does, for CAP_NET_ADMIN); whoever installs one keeps
// its own record.
//
// The kernel's rules beside TCP-AO (Linux 6.7+; the conformance table
// proves them on both kernels):
//   - AddMD5 fails with EKEYREJECTED when the socket has TCP-AO and
//     either ao_required is set or a TCP-AO key covers the peer's
//     address (tcp_ao_required);
//   - an AO AddKey fails with EKEYREJECTED when an MD5 key covers the AO
//     key's address (its prefix's first address);
//   - setting ao_required fails with EKEYREJECTED while the socket has
//     any MD5 key;
//   - an AO key whose prefix covers an MD5 peer without its first address
//     lying inside the MD5 key's prefix is taken, and that peer may then
//     connect with either kind (never unsigned): the prepared step of a
//     migration;
//   - an incoming segment is checked against the kind it carries: an
//     MD5-signed one against the MD5 key for its source, an AO-signed one
//     against the AO keys, an unsigned one is dropped when either kind
//     has a key for its source (or ao_required is set); an accepted
//     socket gets the kind its SYN used;
//   - an established socket without TCP-AO refuses the first AO key
//     (EISCONN): an MD5 connection never changes kind in place;
//   - a connecting socket with an MD5 key for its peer drops its TCP-AO
//     at connect(2); else TCP-AO for the peer drops its MD5 keys.
type MD5Socket interface {
	// AddMD5 installs k, replacing the password of an MD5 key with the
	// same prefix and ifindex. EINVAL: a prefix longer than the family's,
	// an ifindex that is not a VRF; EKEYREJECTED: see above.
	AddMD5(k MD5Key) error
	// DelMD5 deletes the key r names exactly. ENOENT: no such key.
	DelMD5(r MD5Ref) error
}

// MD5Reader reads a socket's TCP-MD5 keys back (sock_diag on Linux,
// which shows them to a CAP_NET_ADMIN reader only).
type MD5Reader interface {
	MD5Keys() ([]MD5Info, error)
}

// ReadMD5 returns s's TCP-MD5 keys, or ErrNoMD5 when s cannot show them.
func ReadMD5(s Socket) ([]MD5Info, error) {
	if r, ok := s.(MD5Reader); ok {
		return r.MD5Keys()
	}
	return nil, fmt.Errorf("%w (%T cannot read them back)", ErrNoMD5, s)
}

// MD5 returns s's TCP-MD5 side, or ErrNoMD5.
func MD5(s Socket) (MD5Socket, error) {
	if m, ok := s.(MD5Socket); ok {
		return m, nil
	}
	return nil, fmt.Errorf("%w (%T)", ErrNoMD5, s)
}

// AddMD5 is s's AddMD5, or ErrNoMD5: for wrappers that pass TCP-MD5
// through.
func AddMD5(s Socket, k MD5Key) error {
	m, err := MD5(s)
	if err != nil {
		return err
	}
	return m.AddMD5(k)
}

// DelMD5 is s's DelMD5, or ErrNoMD5.
func DelMD5(s Socket, r MD5Ref) error {
	m, err := MD5(s)
	if err != nil {
		return err
	}
	return m.DelMD5(r)
}

// md5Sig mirrors struct tcp_md5sig (include/uapi/linux/tcp.h), 216 bytes:
// the address, then flags, prefixlen, keylen, ifindex and the key, every
// field at its natural offset on every architecture.
type md5Sig struct {
	Addr      [sockaddrStorage]byte // struct __kernel_sockaddr_storage tcpm_addr
	Flags     uint8                 // __u8 tcpm_flags
	Prefixlen uint8                 // __u8 tcpm_prefixlen
	KeyLen    uint16                // __u16 tcpm_keylen
	IfIndex   int32                 // int tcpm_ifindex
	Key       [MaxMD5KeyLen]byte    // __u8 tcpm_key[TCP_MD5SIG_MAXKEYLEN]
}

const (
	optMD5SigExt   = 32 // TCP_MD5SIG_EXT
	md5FlagPrefix  = 1  // TCP_MD5SIG_FLAG_PREFIX
	md5FlagIfIndex = 2  // TCP_MD5SIG_FLAG_IFINDEX
	sizeofMD5Sig   = 216
)

// encodeMD5 fills c for TCP_MD5SIG_EXT: always with the prefix flag (the
// prefix length counts IPv4 bits for an IPv4 peer on an IPv6 socket, as
// for TCP-AO), the ifindex flag when r names a VRF, and the key (none: a
// delete).
func encodeMD5(c *md5Sig, r MD5Ref, key []byte, sockFamily int) error {
	*c = md5Sig{}
	if err := sockaddrPeer(&c.Addr, r.Peer, sockFamily); err != nil {
		return err
	}
	c.Flags = md5FlagPrefix
	c.Prefixlen = uint8(r.Peer.Bits())
	if r.IfIndex != 0 {
		c.Flags |= md5FlagIfIndex
		c.IfIndex = int32(r.IfIndex)
	}
	c.KeyLen = uint16(copy(c.Key[:], key))
	return nil
}
