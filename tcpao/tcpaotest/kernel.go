package tcpaotest

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/aokeyd/aokeyd/tcpao"
)

const (
	afINET  = 2
	afINET6 = 10
)

// mkt is struct tcp_ao_key.
type mkt struct {
	family     int
	addr       netip.Addr // unmapped: 4-byte for AF_INET
	prefix     int
	l3index    int
	ifindexFlg bool
	excludeOpt bool
	sndid      uint8
	rcvid      uint8
	alg        tcpao.Algorithm
	maclen     uint8
	fp         tcpao.Fingerprint
	size       int
	good, bad  uint64
	freed      bool // BugAsyncDelInUse: freed while still referenced
}

// aoInfo is struct tcp_ao_info. keys[0] is the hlist head.
type aoInfo struct {
	keys                    []*mkt
	current, rnext          *mkt
	aoRequired, acceptICMPs bool
	good, bad, keyNotFound  uint64
	aoRequiredCnt, icmp     uint64
}

func (ao *aoInfo) linkHead(k *mkt) { ao.keys = append([]*mkt{k}, ao.keys...) }

func (ao *aoInfo) unlink(k *mkt) {
	for i, x := range ao.keys {
		if x == k {
			ao.keys = append(ao.keys[:i:i], ao.keys[i+1:]...)
			return
		}
	}
}

// established is tcp_ao_established_key: the first key with the given ids
// (negative: any).
func (ao *aoInfo) established(sndid, rcvid int) *mkt {
	for _, k := range ao.keys {
		if (sndid >= 0 && int(k.sndid) != sndid) || (rcvid >= 0 && int(k.rcvid) != rcvid) {
			continue
		}
		return k
	}
	return nil
}

// lookup is __tcp_ao_do_lookup with prefix = min(prefix, key's prefix).
func (ao *aoInfo) lookup(l3index int, addr netip.Addr, prefix, sndid, rcvid int) *mkt {
	for _, k := range ao.keys {
		if k.matches(l3index, addr, min(prefix, k.prefix), sndid, rcvid) {
			return k
		}
	}
	return nil
}

// matches is tcp_ao_key_cmp() == 0. An invalid addr is AF_UNSPEC.
func (k *mkt) matches(l3index int, addr netip.Addr, prefix, sndid, rcvid int) bool {
	if sndid >= 0 && int(k.sndid) != sndid {
		return false
	}
	if rcvid >= 0 && int(k.rcvid) != rcvid {
		return false
	}
	if l3index >= 0 && k.ifindexFlg && k.l3index != l3index {
		return false
	}
	if !addr.IsValid() {
		return true
	}
	addr = addr.Unmap()
	fam := afINET6
	if addr.Is4() {
		fam = afINET
	}
	if k.family != fam {
		return false
	}
	if k.addr.IsUnspecified() || addr.IsUnspecified() {
		return true
	}
	return prefixEqual(k.addr, addr, prefix)
}

func prefixEqual(a, b netip.Addr, bits int) bool {
	bits = min(bits, a.BitLen())
	pa, _ := a.Prefix(bits)
	pb, _ := b.Prefix(bits)
	return pa == pb
}

func hasHostBits(a netip.Addr, bits int) bool {
	p, _ := a.Prefix(bits)
	return p.Addr() != a
}

func sysErr(call string, e error) error { return os.NewSyscallError(call, e) }

// sockaddrPeer is what the Linux binding's encoder refuses before any system
// call.
func sockaddrPeer(p netip.Prefix, sockFamily int) error {
	if !p.IsValid() {
		return fmt.Errorf("%w: %v", tcpao.ErrAddress, p)
	}
	if sockFamily == afINET && !p.Addr().Is4() {
		return fmt.Errorf("%w: IPv6 peer %s on an IPv4 socket", tcpao.ErrAddress, p)
	}
	return nil
}

// aoGate is the do_tcp_setsockopt() check in front of the three setsockopts:
// the first TCP-AO option needs a closed or listening socket.
func (s *Sock) aoGate() error {
	if s.state == stateGone {
		return eBADF
	}
	if s.state != stateClosed && s.state != stateListen && s.ao == nil {
		return eISCONN
	}
	return nil
}

// verifyAddr is tcp_ao_verify_ipv4/ipv6: it returns the key's family and
// (unmapped) address.
func (s *Sock) verifyAddr(p netip.Prefix) (int, netip.Addr, error) {
	a, bits := p.Addr(), p.Bits()
	connected := s.peer.IsValid()
	if s.family == afINET {
		if bits == 0 {
			if !a.IsUnspecified() {
				return 0, a, eINVAL
			}
			return afINET, a, nil
		}
		if a.IsUnspecified() || bits > 32 || hasHostBits(a, bits) {
			return 0, a, eINVAL
		}
		if connected && !prefixEqual(s.peer, a, bits) {
			return 0, a, eINVAL
		}
		return afINET, a, nil
	}
	a16 := netip.AddrFrom16(a.As16())
	switch {
	case bits != 0 && a16.Is4In6():
		a4 := a16.Unmap()
		if bits > 32 || a4.IsUnspecified() || hasHostBits(a4, bits) {
			return 0, a, eINVAL
		}
		if connected && (!s.peer.Unmap().Is4() || !prefixEqual(s.peer.Unmap(), a4, bits)) {
			return 0, a, eINVAL
		}
		return afINET, a4, nil
	case bits != 0:
		if a16.IsUnspecified() || bits > 128 || hasHostBits(a16, bits) {
			return 0, a, eINVAL
		}
		if connected && (s.peer.Is4() || !prefixEqual(s.peer, a16, bits)) {
			return 0, a, eINVAL
		}
		return afINET6, a16, nil
	default:
		if !a16.IsUnspecified() {
			return 0, a, eINVAL
		}
		return afINET6, a16, nil
	}
}

// synOptionSpace is MAX_TCP_OPTION_SPACE - MSS - timestamps - wscale.
const synOptionSpace = 40 - 4 - 12 - 4

// AddKey is TCP_AO_ADD_KEY; see tcpao.Socket and the package comment.
func (s *Sock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	defer s.net.wrote(s) // after the unlock
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if err := s.addKey(k, o); err != nil {
		return fmt.Errorf("tcpao: add key send=%d recv=%d peer=%s: %w", k.SendID, k.RecvID, k.Peer, err)
	}
	return nil
}

func (s *Sock) addKey(k tcpao.Key, o tcpao.AddOptions) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if err := sockaddrPeer(k.Peer, s.family); err != nil {
		return err
	}
	call := "setsockopt(TCP_AO_ADD_KEY)"
	if err := s.aoGate(); err != nil {
		return sysErr(call, err)
	}
	fam, addr, err := s.verifyAddr(k.Peer)
	if err != nil {
		return sysErr(call, err)
	}
	if (o.SetCurrent || o.SetRNext) && s.state == stateListen {
		return sysErr(call, eINVAL)
	}
	l3index := 0
	if k.IfIndex != 0 {
		if !s.net.vrfs[k.IfIndex] {
			return sysErr(call, eINVAL)
		}
		l3index = k.IfIndex
		if s.state != stateListen && s.state != stateClosed {
			return sysErr(call, eINVAL) // the model never binds to a device
		}
	}
	// tcp_ao_add_cmd: no AO key for an address an MD5 key covers (in the
	// key's VRF when it names one, else in any).
	md5L3 := -1
	if k.IfIndex != 0 {
		md5L3 = l3index
	}
	if s.md5Lookup(md5L3, addr) != nil {
		return sysErr(call, eKEYREJECTED)
	}
	bits := k.Peer.Bits()
	if s.ao != nil {
		if s.ao.lookup(l3index, addr, bits, -1, int(k.RecvID)) != nil ||
			s.ao.lookup(l3index, addr, bits, int(k.SendID), -1) != nil {
			return sysErr(call, eEXIST)
		}
	}
	if s.net.refused[k.Algorithm] {
		// tcp_ao_key_alloc: the crypto API has no such hash (a kernel
		// built without it, or Linux 7.2's short list).
		return sysErr(call, eNOENT)
	}
	size := tcpao.KeyOptMem(k.Algorithm)
	if size > s.net.optMemMax || s.omem+size >= s.net.optMemMax {
		return sysErr(call, eNOMEM)
	}
	maclen := k.MACLen
	if maclen == 0 {
		maclen = tcpao.DefaultMACLen
	}
	if (int(maclen)+4+3)&^3 > synOptionSpace {
		return sysErr(call, eMSGSIZE)
	}
	key := &mkt{
		family: fam, addr: addr, prefix: bits, l3index: l3index, ifindexFlg: k.IfIndex != 0,
		excludeOpt: k.ExcludeOptions, sndid: k.SendID, rcvid: k.RecvID, alg: k.Algorithm,
		maclen: maclen, fp: k.Secret.Fingerprint(), size: size,
	}
	first := s.ao == nil
	if first {
		s.ao = &aoInfo{}
	}
	if s.state != stateListen && s.state != stateClosed && first {
		s.ao.current, s.ao.rnext = key, key
	}
	s.ao.linkHead(key)
	s.omem += size
	if o.SetCurrent {
		s.ao.current = key
	}
	if o.SetRNext {
		s.ao.rnext = key
	}
	return nil
}

// DelKey is TCP_AO_DEL_KEY; see tcpao.Socket and the package comment.
func (s *Sock) DelKey(d tcpao.DelKey) error {
	defer s.net.wrote(s) // after the unlock
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if err := s.delKey(d); err != nil {
		return fmt.Errorf("tcpao: delete key send=%d recv=%d peer=%s: %w", d.SendID, d.RecvID, d.Peer, err)
	}
	if s.state == stateListen {
		if d.Async {
			s.net.lisDels.Async++
		} else {
			s.net.lisDels.Sync++
		}
	}
	return nil
}

func (s *Sock) delKey(d tcpao.DelKey) error {
	if err := sockaddrPeer(d.Peer, s.family); err != nil {
		return err
	}
	call := "setsockopt(TCP_AO_DEL_KEY)"
	if err := s.aoGate(); err != nil {
		return sysErr(call, err)
	}
	if (d.SetCurrent || d.SetRNext) && s.state == stateListen {
		return sysErr(call, eINVAL)
	}
	if s.ao == nil {
		return sysErr(call, eNOENT)
	}
	var nc, nr *mkt
	if d.SetCurrent {
		if nc = s.ao.established(int(d.Current), -1); nc == nil {
			return sysErr(call, eNOENT)
		}
	}
	if d.SetRNext {
		if nr = s.ao.established(-1, int(d.RNext)); nr == nil {
			return sysErr(call, eNOENT)
		}
	}
	if d.Async && s.state != stateListen {
		return sysErr(call, eINVAL)
	}
	addr := d.Peer.Addr()
	if s.family == afINET6 {
		addr = netip.AddrFrom16(addr.As16()).Unmap()
	}
	fam := afINET6
	if addr.Is4() {
		fam = afINET
	}
	l3index := d.IfIndex
	if s.net.bugs&BugVRFDelete != 0 {
		l3index = 0 // the bug: the request's ifindex was never used
	}
	for _, k := range s.ao.keys {
		if k.sndid != d.SendID || k.rcvid != d.RecvID || k.family != fam || k.prefix != d.Peer.Bits() ||
			k.addr != addr || k.ifindexFlg != (d.IfIndex != 0) || k.l3index != l3index || k == nc || k == nr {
			continue
		}
		s.ao.unlink(k)
		if d.Async && s.net.bugs&BugAsyncDelInUse != 0 {
			k.freed = true // freed, but Current_key/RNext_key still point at it
			s.omem -= k.size
			return nil
		}
		if d.Async {
			if s.ao.current == k {
				s.ao.current = nil
			}
			if s.ao.rnext == k {
				s.ao.rnext = nil
			}
			s.omem -= k.size
			return nil
		}
		if nc != nil {
			s.ao.current = nc
		}
		if nr != nil {
			s.ao.rnext = nr
		}
		if s.ao.current == k || s.ao.rnext == k {
			s.ao.linkHead(k)
			return sysErr(call, eBUSY)
		}
		s.omem -= k.size
		return nil
	}
	return sysErr(call, eNOENT)
}

// Info is getsockopt(TCP_AO_INFO).
func (s *Sock) Info() (tcpao.Info, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	in, err := s.info()
	if err != nil {
		return tcpao.Info{}, fmt.Errorf("tcpao: info: %w", err)
	}
	return in, nil
}

func (s *Sock) info() (tcpao.Info, error) {
	if s.state == stateGone {
		return tcpao.Info{}, sysErr("getsockopt(TCP_AO_INFO)", eBADF)
	}
	ao := s.ao
	if ao == nil {
		return tcpao.Info{}, sysErr("getsockopt(TCP_AO_INFO)", eNOENT)
	}
	in := tcpao.Info{
		AORequired: ao.aoRequired, AcceptICMPs: ao.acceptICMPs,
		PktGood: ao.good, PktBad: ao.bad, PktKeyNotFound: ao.keyNotFound,
		PktAORequired: ao.aoRequiredCnt, PktDroppedICMP: ao.icmp,
	}
	if ao.current != nil {
		in.HaveCurrent, in.CurrentKey = true, ao.current.sndid
		if ao.current.freed {
			s.net.uaf++
		}
	}
	if ao.rnext != nil {
		in.HaveRNext, in.RNextKey = true, ao.rnext.rcvid
		if ao.rnext.freed {
			s.net.uaf++
		}
	}
	return in, nil
}

// SetInfo is setsockopt(TCP_AO_INFO) after a read of the current state, like
// the Linux binding.
func (s *Sock) SetInfo(c tcpao.InfoChange) error {
	defer s.net.wrote(s) // after the unlock
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if err := s.setInfo(c); err != nil {
		return fmt.Errorf("tcpao: set info: %w", err)
	}
	return nil
}

func (s *Sock) setInfo(c tcpao.InfoChange) error {
	call := "setsockopt(TCP_AO_INFO)"
	cur, _ := s.info()
	if err := s.aoGate(); err != nil {
		return sysErr(call, err)
	}
	if (c.Current != nil || c.RNext != nil) && s.state == stateListen {
		return sysErr(call, eINVAL)
	}
	if c.AORequired != nil && *c.AORequired && len(s.md5) > 0 {
		// tcp_ao_required_verify: ao_required on a socket with any MD5
		// key would leave that peer neither kind.
		return sysErr(call, eKEYREJECTED)
	}
	ao := s.ao
	if ao == nil {
		ao = &aoInfo{}
	}
	var nc, nr *mkt
	if c.Current != nil {
		if nc = ao.established(int(*c.Current), -1); nc == nil {
			return sysErr(call, eNOENT)
		}
	}
	if c.RNext != nil {
		if nr = ao.established(-1, int(*c.RNext)); nr == nil {
			return sysErr(call, eNOENT)
		}
	}
	if c.ResetCounters {
		ao.good, ao.bad, ao.keyNotFound, ao.aoRequiredCnt, ao.icmp = 0, 0, 0, 0, 0
	}
	ao.aoRequired, ao.acceptICMPs = cur.AORequired, cur.AcceptICMPs
	if c.AORequired != nil {
		ao.aoRequired = *c.AORequired
	}
	if c.AcceptICMPs != nil {
		ao.acceptICMPs = *c.AcceptICMPs
	}
	if nc != nil {
		ao.current = nc
	}
	if nr != nil {
		ao.rnext = nr
	}
	s.ao = ao
	return nil
}

// Keys is getsockopt(TCP_AO_GET_KEYS).
func (s *Sock) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	out, err := s.keys(f)
	if err != nil {
		return nil, fmt.Errorf("tcpao: get keys: %w", err)
	}
	return out, nil
}

func (s *Sock) keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	call := "getsockopt(TCP_AO_GET_KEYS)"
	if f.Ref != nil && (f.Current || f.RNext) {
		return nil, tcpao.ErrFilter
	}
	if f.Ref != nil && !f.Ref.Peer.IsValid() {
		return nil, fmt.Errorf("%w: %v", tcpao.ErrAddress, f.Ref.Peer)
	}
	if s.state == stateGone {
		return nil, sysErr(call, eBADF)
	}
	if s.ao == nil {
		return nil, sysErr(call, eNOENT)
	}
	l3index := -1
	var addr netip.Addr
	bits := 0
	if r := f.Ref; r != nil {
		if r.IfIndex != 0 {
			l3index = r.IfIndex
		}
		addr, bits = r.Peer.Addr(), r.Peer.Bits()
		a := addr
		if a.Is4In6() && bits != 0 {
			a = a.Unmap()
			if bits > 32 {
				return nil, sysErr(call, eINVAL)
			}
		}
		if (bits != 0 && a.IsUnspecified()) || (bits == 0 && !a.IsUnspecified()) || hasHostBits(a, bits) {
			return nil, sysErr(call, eINVAL)
		}
	}
	var out []tcpao.KeyInfo
	if f.Ref == nil && !f.Current && !f.RNext {
		out = make([]tcpao.KeyInfo, 0, len(s.ao.keys)) // every key: no regrowth
	}
	for _, k := range s.ao.keys {
		switch {
		case f.Current || f.RNext:
			if !(f.Current && k == s.ao.current) && !(f.RNext && k == s.ao.rnext) {
				continue
			}
		case f.Ref != nil:
			if !k.matches(l3index, addr, bits, int(f.Ref.SendID), int(f.Ref.RecvID)) {
				continue
			}
		}
		ki := tcpao.KeyInfo{
			KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(k.addr, k.prefix), SendID: k.sndid, RecvID: k.rcvid},
			Algorithm: k.alg, MACLen: k.maclen, ExcludeOptions: k.excludeOpt, Fingerprint: k.fp,
			IsCurrent: k == s.ao.current, IsRNext: k == s.ao.rnext, PktGood: k.good, PktBad: k.bad,
		}
		if !f.Fingerprints(k.sndid, k.rcvid) {
			ki.Fingerprint = tcpao.Fingerprint{}
		}
		if k.ifindexFlg {
			ki.IfIndex = k.l3index
		}
		out = append(out, ki)
	}
	return out, nil
}
