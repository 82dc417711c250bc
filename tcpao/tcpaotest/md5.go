package tcpaotest

import (
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

// md5Key is struct tcp_md5sig_key.
type md5Key struct {
	family     int
	addr       netip.Addr // unmapped
	prefix     int
	l3index    int
	ifindexFlg bool
	fp         tcpao.Fingerprint
}

var _ tcpao.MD5Socket = (*Sock)(nil)

// md5Lookup is __tcp_md5_do_lookup: the longest-prefix MD5 key covering
// addr; l3index < 0 is any_l3index, else keys bound to another VRF are
// skipped.
func (s *Sock) md5Lookup(l3index int, addr netip.Addr) *md5Key {
	addr = addr.Unmap()
	var best *md5Key
	for _, k := range s.md5 {
		if l3index >= 0 && k.ifindexFlg && k.l3index != l3index {
			continue
		}
		if (k.family == afINET) != addr.Is4() || !prefixEqual(k.addr, addr, k.prefix) {
			continue
		}
		if best == nil || k.prefix > best.prefix {
			best = k
		}
	}
	return best
}

// aoCovers is tcp_ao_required(..., stat_inc=false): the socket has TCP-AO
// and either ao_required or a key covering addr.
func (s *Sock) aoCovers(l3index int, addr netip.Addr) bool {
	return s.ao != nil && (s.ao.aoRequired || s.ao.lookup(l3index, addr, 255, -1, -1) != nil)
}

// AddMD5 is setsockopt(TCP_MD5SIG_EXT) with a key: tcp_v4/v6_parse_md5_keys
// then tcp_md5_do_add, which replaces the password of an exact match.
func (s *Sock) AddMD5(k tcpao.MD5Key) error {
	defer s.net.wrote(s) // after the unlock
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if err := s.addMD5(k); err != nil {
		return fmt.Errorf("tcpao: add %s: %w", k.MD5Ref, err)
	}
	return nil
}

// md5Ref resolves r for this socket: family, unmapped address, l3index.
func (s *Sock) md5Ref(r tcpao.MD5Ref) (int, netip.Addr, int, error) {
	call := "setsockopt(TCP_MD5SIG_EXT)"
	if s.state == stateGone {
		return 0, netip.Addr{}, 0, sysErr(call, eBADF)
	}
	if err := sockaddrPeer(r.Peer, s.family); err != nil {
		return 0, netip.Addr{}, 0, err
	}
	addr := r.Peer.Addr()
	if s.family == afINET6 {
		addr = netip.AddrFrom16(addr.As16()).Unmap()
	}
	fam := afINET6
	if addr.Is4() {
		fam = afINET
	}
	if r.Peer.Bits() > addr.BitLen() {
		return 0, addr, 0, sysErr(call, eINVAL)
	}
	if r.IfIndex != 0 && !s.net.vrfs[r.IfIndex] {
		return 0, addr, 0, sysErr(call, eINVAL)
	}
	return fam, addr, r.IfIndex, nil
}

func (s *Sock) addMD5(k tcpao.MD5Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	fam, addr, l3index, err := s.md5Ref(k.MD5Ref)
	if err != nil {
		return err
	}
	aoL3 := -1
	if k.IfIndex != 0 {
		aoL3 = l3index
	}
	if s.aoCovers(aoL3, addr) {
		return sysErr("setsockopt(TCP_MD5SIG_EXT)", eKEYREJECTED)
	}
	if x := s.md5Exact(fam, addr, k.Peer.Bits(), k.IfIndex != 0, l3index); x != nil {
		x.fp = k.Secret.Fingerprint() // the password replaced in place
		return nil
	}
	s.md5 = append(s.md5, &md5Key{family: fam, addr: addr, prefix: k.Peer.Bits(), l3index: l3index,
		ifindexFlg: k.IfIndex != 0, fp: k.Secret.Fingerprint()})
	return nil
}

// md5Exact is tcp_md5_do_lookup_exact.
func (s *Sock) md5Exact(fam int, addr netip.Addr, prefix int, ifindexFlg bool, l3index int) *md5Key {
	for _, x := range s.md5 {
		if x.family == fam && x.addr == addr && x.prefix == prefix && x.ifindexFlg == ifindexFlg && x.l3index == l3index {
			return x
		}
	}
	return nil
}

// DelMD5 is setsockopt(TCP_MD5SIG_EXT) with keylen 0: tcp_md5_do_del.
func (s *Sock) DelMD5(r tcpao.MD5Ref) error {
	defer s.net.wrote(s) // after the unlock
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if err := s.delMD5(r); err != nil {
		return fmt.Errorf("tcpao: delete %s: %w", r, err)
	}
	return nil
}

func (s *Sock) delMD5(r tcpao.MD5Ref) error {
	fam, addr, l3index, err := s.md5Ref(r)
	if err != nil {
		return err
	}
	x := s.md5Exact(fam, addr, r.Peer.Bits(), r.IfIndex != 0, l3index)
	if x == nil {
		return sysErr("setsockopt(TCP_MD5SIG_EXT)", eNOENT)
	}
	for i, y := range s.md5 {
		if y == x {
			s.md5 = append(s.md5[:i:i], s.md5[i+1:]...)
			break
		}
	}
	return nil
}

// MD5Keys lists the socket's TCP-MD5 keys as sock_diag's
// INET_DIAG_MD5SIG shows them on Linux (without their VRF binding).
func (s *Sock) MD5Keys() ([]tcpao.MD5Info, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	out := make([]tcpao.MD5Info, 0, len(s.md5))
	for _, k := range s.md5 {
		out = append(out, tcpao.MD5Info{MD5Ref: tcpao.MD5Ref{Peer: netip.PrefixFrom(k.addr, k.prefix)}, Fingerprint: k.fp})
	}
	if s.state == stateGone {
		return nil, sysErr("sock_diag", eNOENT)
	}
	return out, nil
}

// receiveMD5 is tcp_inbound_md5_hash for an MD5-signed segment: dropped
// when no MD5 key covers src (TCPMD5Unexpected) or the passwords differ
// (TCPMD5Failure).
func (s *Sock) receiveMD5(src netip.Addr, seg *segment) bool {
	k := s.md5Lookup(0, src)
	return k != nil && k.fp == seg.md5.fp
}

// md5For is the MD5 key this socket signs with toward dst (the
// md5_lookup of tcp_get_current_key), nil when none.
func (s *Sock) md5For(dst netip.Addr) *md5Key { return s.md5Lookup(0, dst) }
