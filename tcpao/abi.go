package tcpao

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Socket option names and flags of include/uapi/linux/tcp.h (Linux 6.7+).
const (
	optAddKey  = 38 // TCP_AO_ADD_KEY
	optDelKey  = 39 // TCP_AO_DEL_KEY
	optInfo    = 40 // TCP_AO_INFO
	optGetKeys = 41 // TCP_AO_GET_KEYS
	optRepair  = 42 // TCP_AO_REPAIR (not used; listed for completeness)

	keyfIfIndex    = 1 << 0 // TCP_AO_KEYF_IFINDEX
	keyfExcludeOpt = 1 << 1 // TCP_AO_KEYF_EXCLUDE_OPT

	// Linux address family numbers as they appear in sockaddr.ss_family.
	afINET  = 2
	afINET6 = 10

	algNameLen       = 64  // sizeof(tcp_ao_add.alg_name)
	sockaddrStorage  = 128 // sizeof(struct __kernel_sockaddr_storage)
	sizeofAOAdd      = 288
	sizeofAODel      = 144
	sizeofAOInfoOpt  = 48
	sizeofAOGetsockt = 304
)

// ErrFilter is returned by Keys for a KeyFilter that sets Ref together with
// Current or RNext: the kernel matches either by state or by address, never
// both.
var ErrFilter = errors.New("tcpao: key filter: Ref cannot be combined with Current or RNext")

// aoAdd mirrors struct tcp_ao_add (include/uapi/linux/tcp.h), 288 bytes,
// __attribute__((aligned(8))). Every field sits at the offset the C compiler
// gives it on every architecture; 386 gets the same layout because nothing
// needs more than 4-byte alignment before its natural offset.
type aoAdd struct {
	Addr      [sockaddrStorage]byte // struct __kernel_sockaddr_storage addr
	AlgName   [algNameLen]byte      // char alg_name[64]
	IfIndex   int32                 // __s32 ifindex
	Bits      uint32                // set_current:1, set_rnext:1, reserved:30
	Reserved2 uint16                // __u16 reserved2
	Prefix    uint8                 // __u8 prefix
	SndID     uint8                 // __u8 sndid
	RcvID     uint8                 // __u8 rcvid
	MACLen    uint8                 // __u8 maclen
	KeyFlags  uint8                 // __u8 keyflags
	KeyLen    uint8                 // __u8 keylen
	Key       [MaxKeyLen]byte       // __u8 key[TCP_AO_MAXKEYLEN]
}

// aoDel mirrors struct tcp_ao_del (include/uapi/linux/tcp.h), 144 bytes,
// aligned(8).
type aoDel struct {
	Addr       [sockaddrStorage]byte // struct __kernel_sockaddr_storage addr
	IfIndex    int32                 // __s32 ifindex
	Bits       uint32                // set_current:1, set_rnext:1, del_async:1, reserved:29
	Reserved2  uint16                // __u16 reserved2
	Prefix     uint8                 // __u8 prefix
	SndID      uint8                 // __u8 sndid
	RcvID      uint8                 // __u8 rcvid
	CurrentKey uint8                 // __u8 current_key
	RNext      uint8                 // __u8 rnext
	KeyFlags   uint8                 // __u8 keyflags
}

// aoInfoOpt mirrors struct tcp_ao_info_opt (include/uapi/linux/tcp.h), 48
// bytes, aligned(8). The __u64 counters start at offset 8, so 386's 4-byte
// alignment of uint64 changes nothing.
type aoInfoOpt struct {
	Bits           uint32 // set_current:1, set_rnext:1, ao_required:1, set_counters:1, accept_icmps:1, reserved:27
	Reserved2      uint16 // __u16 reserved2
	CurrentKey     uint8  // __u8 current_key
	RNext          uint8  // __u8 rnext
	PktGood        uint64 // __u64 pkt_good
	PktBad         uint64 // __u64 pkt_bad
	PktKeyNotFound uint64 // __u64 pkt_key_not_found
	PktAORequired  uint64 // __u64 pkt_ao_required
	PktDroppedICMP uint64 // __u64 pkt_dropped_icmp
}

// aoGetsockopt mirrors struct tcp_ao_getsockopt (include/uapi/linux/tcp.h),
// 304 bytes, aligned(8). getsockopt(TCP_AO_GET_KEYS) takes an array of them;
// optlen is the size of one element and element 0's nkeys the array length.
type aoGetsockopt struct {
	Addr     [sockaddrStorage]byte // struct __kernel_sockaddr_storage addr
	AlgName  [algNameLen]byte      // char alg_name[64]
	Key      [MaxKeyLen]byte       // __u8 key[TCP_AO_MAXKEYLEN]
	NKeys    uint32                // __u32 nkeys
	Bits     uint16                // is_current:1, is_rnext:1, get_all:1, reserved:13
	SndID    uint8                 // __u8 sndid
	RcvID    uint8                 // __u8 rcvid
	Prefix   uint8                 // __u8 prefix
	MACLen   uint8                 // __u8 maclen
	KeyFlags uint8                 // __u8 keyflags
	KeyLen   uint8                 // __u8 keylen
	IfIndex  int32                 // __s32 ifindex
	PktGood  uint64                // __u64 pkt_good
	PktBad   uint64                // __u64 pkt_bad
}

// putSockaddr writes a as a sockaddr_in (AF_INET) or sockaddr_in6 (AF_INET6)
// with port 0. The family is the native-endian sa_family_t; the address is in
// network order.
func putSockaddr(dst *[sockaddrStorage]byte, a netip.Addr, family int) {
	clear(dst[:])
	binary.NativeEndian.PutUint16(dst[0:2], uint16(family))
	if family == afINET {
		b := a.As4()
		copy(dst[4:8], b[:]) // struct sockaddr_in: family, port, sin_addr
		return
	}
	b := a.As16()
	copy(dst[8:24], b[:]) // struct sockaddr_in6: family, port, flowinfo, sin6_addr
}

// sockaddrPeer encodes the peer address of an ADD/DEL request for a socket of
// family sockFamily, the way the kernel parses it: an AF_INET socket reads a
// sockaddr_in, an AF_INET6 socket a sockaddr_in6 (IPv4 peers as
// v4-mapped addresses, prefix still counted in IPv4 bits).
func sockaddrPeer(dst *[sockaddrStorage]byte, p netip.Prefix, sockFamily int) error {
	if !p.IsValid() {
		return fmt.Errorf("%w: %v", ErrAddress, p)
	}
	a := p.Addr()
	switch {
	case sockFamily == afINET && a.Is4():
		putSockaddr(dst, a, afINET)
	case sockFamily == afINET && !a.Is4():
		return fmt.Errorf("%w: IPv6 peer %s on an IPv4 socket", ErrAddress, p)
	case a.Is4():
		putSockaddr(dst, netip.AddrFrom16(a.As16()), afINET6)
	default:
		putSockaddr(dst, a, afINET6)
	}
	return nil
}

// getSockaddr decodes a sockaddr_in or sockaddr_in6 written by the kernel.
func getSockaddr(src *[sockaddrStorage]byte) (netip.Addr, error) {
	switch f := binary.NativeEndian.Uint16(src[0:2]); f {
	case afINET:
		return netip.AddrFrom4([4]byte(src[4:8])), nil
	case afINET6:
		return netip.AddrFrom16([16]byte(src[8:24])), nil
	default:
		return netip.Addr{}, fmt.Errorf("%w: address family %d in kernel answer", ErrAddress, f)
	}
}

func putAlgName(dst *[algNameLen]byte, a Algorithm) error {
	if len(a) >= algNameLen {
		return fmt.Errorf("%w: name of %d bytes", ErrAlgorithm, len(a))
	}
	clear(dst[:])
	copy(dst[:], a)
	return nil
}

// algFromKernel is the Algorithm of a NUL-terminated alg_name from the
// kernel, without allocating for the algorithms this package offers (the
// spellings ParseAlgorithm accepts); any other name is kept as the kernel
// spelled it.
func algFromKernel(b []byte) Algorithm {
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	switch string(b) {
	case string(HMACSHA1):
		return HMACSHA1
	case string(HMACSHA256):
		return HMACSHA256
	case string(CMACAES128), "cmac(aes)":
		return CMACAES128
	}
	if a, err := ParseAlgorithm(string(b)); err == nil {
		return a
	}
	return Algorithm(b)
}

// encodeAdd fills the TCP_AO_ADD_KEY request for k on a socket of family
// sockFamily. The caller zeroes c.Key after the call.
func encodeAdd(c *aoAdd, k Key, o AddOptions, sockFamily int) error {
	if err := k.Validate(); err != nil {
		return err
	}
	*c = aoAdd{}
	if err := sockaddrPeer(&c.Addr, k.Peer, sockFamily); err != nil {
		return err
	}
	if err := putAlgName(&c.AlgName, k.Algorithm); err != nil {
		return err
	}
	if k.IfIndex != 0 {
		c.IfIndex = int32(k.IfIndex)
		c.KeyFlags |= keyfIfIndex
	}
	if k.ExcludeOptions {
		c.KeyFlags |= keyfExcludeOpt
	}
	c.Bits = bits32(o.SetCurrent, o.SetRNext)
	c.Prefix = uint8(k.Peer.Bits())
	c.SndID, c.RcvID, c.MACLen = k.SendID, k.RecvID, k.MACLen
	c.KeyLen = uint8(copy(c.Key[:], k.Secret.Bytes()))
	return nil
}

// encodeDel fills the TCP_AO_DEL_KEY request for d on a socket of family
// sockFamily.
func encodeDel(c *aoDel, d DelKey, sockFamily int) error {
	*c = aoDel{}
	if err := sockaddrPeer(&c.Addr, d.Peer, sockFamily); err != nil {
		return err
	}
	if d.IfIndex != 0 {
		c.IfIndex = int32(d.IfIndex)
		c.KeyFlags |= keyfIfIndex
	}
	c.Bits = bits32(d.SetCurrent, d.SetRNext, d.Async)
	c.Prefix = uint8(d.Peer.Bits())
	c.SndID, c.RcvID = d.SendID, d.RecvID
	c.CurrentKey, c.RNext = d.Current, d.RNext
	return nil
}

// Bit positions of struct tcp_ao_info_opt's first word.
const (
	infoSetCurrent = iota
	infoSetRNext
	infoAORequired
	infoSetCounters
	infoAcceptICMPs
)

// encodeInfo builds setsockopt(TCP_AO_INFO) from the current state cur and
// the change c: fields c leaves nil keep cur's value.
func encodeInfo(cur Info, c InfoChange) aoInfoOpt {
	aoReq, icmps := cur.AORequired, cur.AcceptICMPs
	if c.AORequired != nil {
		aoReq = *c.AORequired
	}
	if c.AcceptICMPs != nil {
		icmps = *c.AcceptICMPs
	}
	var o aoInfoOpt
	o.Bits = bits32(c.Current != nil, c.RNext != nil, aoReq, c.ResetCounters, icmps)
	if c.Current != nil {
		o.CurrentKey = *c.Current
	}
	if c.RNext != nil {
		o.RNext = *c.RNext
	}
	return o
}

func decodeInfo(o *aoInfoOpt) Info {
	return Info{
		CurrentKey:     o.CurrentKey,
		RNextKey:       o.RNext,
		HaveCurrent:    bit32(o.Bits, infoSetCurrent),
		HaveRNext:      bit32(o.Bits, infoSetRNext),
		AORequired:     bit32(o.Bits, infoAORequired),
		AcceptICMPs:    bit32(o.Bits, infoAcceptICMPs),
		PktGood:        o.PktGood,
		PktBad:         o.PktBad,
		PktKeyNotFound: o.PktKeyNotFound,
		PktAORequired:  o.PktAORequired,
		PktDroppedICMP: o.PktDroppedICMP,
	}
}

// Bit positions of struct tcp_ao_getsockopt's __u16 flags.
const (
	getIsCurrent = iota
	getIsRNext
	getAll
)

// encodeFilter fills element 0 of a GET_KEYS request for up to n keys.
func encodeFilter(c *aoGetsockopt, f KeyFilter, n int) error {
	*c = aoGetsockopt{NKeys: uint32(n)}
	switch {
	case f.Ref != nil && (f.Current || f.RNext):
		return ErrFilter
	case f.Current || f.RNext:
		c.Bits = bits16(f.Current, f.RNext)
	case f.Ref != nil:
		r := f.Ref
		if !r.Peer.IsValid() {
			return fmt.Errorf("%w: %v", ErrAddress, r.Peer)
		}
		fam := afINET6
		if r.Peer.Addr().Is4() {
			fam = afINET
		}
		putSockaddr(&c.Addr, r.Peer.Addr(), fam)
		c.Prefix = uint8(r.Peer.Bits())
		c.SndID, c.RcvID = r.SendID, r.RecvID
		if r.IfIndex != 0 {
			c.IfIndex = int32(r.IfIndex)
			c.KeyFlags = keyfIfIndex
		}
	default:
		c.Bits = bits16(false, false, true)
	}
	return nil
}

// decodeKeyWith turns one GET_KEYS element into a KeyInfo, fingerprinting
// the returned key bytes with h (nil: no fingerprint); the caller zeroes
// the element afterwards.
func decodeKeyWith(h *fingerprinter, c *aoGetsockopt) (KeyInfo, error) {
	a, err := getSockaddr(&c.Addr)
	if err != nil {
		return KeyInfo{}, err
	}
	if int(c.Prefix) > a.BitLen() {
		return KeyInfo{}, fmt.Errorf("%w: prefix /%d for %s in kernel answer", ErrAddress, c.Prefix, a)
	}
	if c.KeyLen > MaxKeyLen {
		return KeyInfo{}, fmt.Errorf("%w: longer than %d bytes in kernel answer", ErrKeyLength, MaxKeyLen)
	}
	alg := algFromKernel(c.AlgName[:])
	ki := KeyInfo{
		KeyRef: KeyRef{
			Peer:   netip.PrefixFrom(a, int(c.Prefix)),
			SendID: c.SndID,
			RecvID: c.RcvID,
		},
		Algorithm:      alg,
		MACLen:         c.MACLen,
		ExcludeOptions: c.KeyFlags&keyfExcludeOpt != 0,
		IsCurrent:      bit16(c.Bits, getIsCurrent),
		IsRNext:        bit16(c.Bits, getIsRNext),
		PktGood:        c.PktGood,
		PktBad:         c.PktBad,
	}
	if h != nil {
		ki.Fingerprint = h.sum(c.Key[:c.KeyLen])
	}
	if c.KeyFlags&keyfIfIndex != 0 {
		ki.IfIndex = int(c.IfIndex)
	}
	return ki, nil
}

// bits32 packs C bitfields declared first-to-last in a __u32.
func bits32(b ...bool) uint32 {
	var v uint32
	for i, x := range b {
		if x {
			v |= 1 << bitPos(i, 32)
		}
	}
	return v
}

func bits16(b ...bool) uint16 {
	var v uint16
	for i, x := range b {
		if x {
			v |= 1 << bitPos(i, 16)
		}
	}
	return v
}

func bit32(v uint32, i int) bool { return v&(1<<bitPos(i, 32)) != 0 }
func bit16(v uint16, i int) bool { return v&(1<<bitPos(i, 16)) != 0 }

// decodeKeys decodes the elements of a GET_KEYS answer.
func decodeKeys(buf []aoGetsockopt, fingerprints bool) ([]KeyInfo, error) {
	return decodeKeysFor(buf, KeyFilter{SkipFingerprint: !fingerprints})
}

// decodeKeysFor decodes the elements of a GET_KEYS answer made with f,
// fingerprinting the keys f asks for (KeyFilter.Fingerprints).
func decodeKeysFor(buf []aoGetsockopt, f KeyFilter) ([]KeyInfo, error) {
	out := make([]KeyInfo, 0, len(buf))
	var h *fingerprinter
	if !f.SkipFingerprint {
		h = getFingerprinter()
		defer h.release()
	}
	for i := range buf {
		c := &buf[i]
		want := h != nil && f.Fingerprints(c.SndID, c.RcvID)
		ki, err := decodeKeyWith(nil, c)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if want {
			// decodeKeyWith checked KeyLen.
			b := c.Key[:c.KeyLen]
			if fp, ok := f.Known.fingerprint(c.SndID, c.RcvID, b); ok {
				ki.Fingerprint = fp
			} else {
				ki.Fingerprint = h.sum(b)
			}
		}
		out = append(out, ki)
	}
	return out, nil
}

func zeroKeys(buf []aoGetsockopt) {
	for i := range buf {
		clear(buf[i].Key[:])
	}
}
