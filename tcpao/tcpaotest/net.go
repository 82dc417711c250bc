package tcpaotest

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/aokeyd/aokeyd/tcpao"
)

// DefaultOptMemMax is Linux's default net.core.optmem_max.
const DefaultOptMemMax = 131072

type state int

const (
	stateClosed      state = iota // TCP_CLOSE, never connected
	stateListen                   // TCP_LISTEN
	stateSynSent                  // TCP_SYN_SENT: a connect that did not complete
	stateEstablished              // TCP_ESTABLISHED
	stateGone                     // close(2)d
)

func (s state) String() string {
	return [...]string{"closed", "listen", "syn-sent", "established", "gone"}[s]
}

// Net is an in-memory network of TCP sockets with the TCP-AO rules of the
// Linux kernel. It is safe for concurrent use.
type Net struct {
	mu        sync.Mutex
	optMemMax int
	vrfs      map[int]bool
	nextPort  uint16
	bugs      Bug
	uaf       int
	lisDels   ListenerDeletes
	refused   map[tcpao.Algorithm]bool
	// onWrite, when set (OnWrite), is called after every key write to
	// any socket, with mu released.
	onWrite atomic.Pointer[func(*Sock)]
}

// OnWrite has f called after every TCP-AO or TCP-MD5 key write (add,
// delete, TCP_AO_INFO set) to any of the net's sockets, successful or
// not, outside the net's lock: a test may connect from f, so as to try a
// SYN between two writes of a listener's (nil: none).
func (n *Net) OnWrite(f func(s *Sock)) {
	if f == nil {
		n.onWrite.Store(nil)
		return
	}
	n.onWrite.Store(&f)
}

// wrote calls the OnWrite hook for s.
func (n *Net) wrote(s *Sock) {
	if f := n.onWrite.Load(); f != nil {
		(*f)(s)
	}
}

// Option configures a Net.
type Option func(*Net)

// WithOptMemMax sets net.core.optmem_max (default DefaultOptMemMax).
func WithOptMemMax(n int) Option { return func(nt *Net) { nt.optMemMax = n } }

// WithVRF declares ifindex an L3 master device (a VRF), so keys may name it.
func WithVRF(ifindex int) Option { return func(nt *Net) { nt.vrfs[ifindex] = true } }

// WithoutAlgorithms makes TCP_AO_ADD_KEY refuse keys of the given
// algorithms with ENOENT, as a kernel whose crypto API lacks them does
// (one built without CONFIG_CRYPTO_CMAC; Linux 7.2 and later accept only
// hmac(sha1), hmac(sha256) and cmac(aes128)).
func WithoutAlgorithms(a ...tcpao.Algorithm) Option {
	return func(nt *Net) {
		for _, x := range a {
			nt.refused[x] = true
		}
	}
}

// Bug is a kernel bug, fixed upstream in the stable trees but present on
// deployed kernels, that the in-memory kernel reproduces on request so that
// the workarounds (tcpao.DeleteKey) can be tested. Without WithKernelBugs
// the in-memory kernel behaves like a fixed kernel.
type Bug uint

const (
	// BugVRFDelete: tcp_ao_del_cmd() never set its l3index from the
	// request's ifindex, so TCP_AO_DEL_KEY of a key bound to a VRF
	// (TCP_AO_KEYF_IFINDEX with a non-zero ifindex) matched nothing and
	// returned ENOENT: such a key could not be deleted at all.
	BugVRFDelete Bug = 1 << iota
	// BugAsyncDelInUse: del_async on a listener freed a key that was still
	// Current_key or RNext_key (set while the socket was in TCP_CLOSE,
	// before listen()) and left the pointer in place; the next read of it
	// used freed memory. Reads of such a dangling key are counted
	// (UseAfterFree) instead of crashing.
	BugAsyncDelInUse
)

// WithKernelBugs makes the network reproduce the given kernel bugs.
func WithKernelBugs(b Bug) Option { return func(nt *Net) { nt.bugs |= b } }

// UseAfterFree is how many times a dangling key pointer was read (only
// BugAsyncDelInUse creates one).
func (n *Net) UseAfterFree() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uaf
}

// ListenerDeletes counts the keys TCP_AO_DEL_KEY removed from listening
// sockets, by how: with del_async or synchronously. A delete that failed
// is not counted.
type ListenerDeletes struct{ Sync, Async int }

// ListenerDeletes is the network's count of listener key deletes so far.
func (n *Net) ListenerDeletes() ListenerDeletes {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lisDels
}

// NewNet returns an empty network.
func NewNet(opts ...Option) *Net {
	n := &Net{optMemMax: DefaultOptMemMax, vrfs: map[int]bool{}, nextPort: 40000, refused: map[tcpao.Algorithm]bool{}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// OptMemMax is the network's net.core.optmem_max.
func (n *Net) OptMemMax() int { return n.optMemMax }

// Sock is one in-memory TCP socket. It implements tcpao.Socket.
type Sock struct {
	net    *Net
	family int
	local  netip.AddrPort
	peer   netip.Addr // daddr once connecting
	state  state
	ao     *aoInfo
	md5    []*md5Key
	omem   int
	// remote is the other end of an established connection (both ends
	// made by ConnectTo): where a keepalive probe goes (peerprobe.go).
	remote *Sock
	// keepalive is SO_KEEPALIVE and TCP_KEEPIDLE, TCP_KEEPINTVL and
	// TCP_KEEPCNT (Linux's defaults until set).
	keepalive keepalive
}

var _ tcpao.Socket = (*Sock)(nil)

// Socket returns a closed TCP socket bound to local (an IPv4 address makes an
// AF_INET socket, an IPv6 address an AF_INET6 one) and an ephemeral port.
func (n *Net) Socket(local netip.Addr) (*Sock, error) {
	if !local.IsValid() {
		return nil, fmt.Errorf("tcpaotest: socket: invalid local address")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fam := afINET6
	if local.Is4() {
		fam = afINET
	}
	n.nextPort++
	return &Sock{net: n, family: fam, local: netip.AddrPortFrom(local, n.nextPort)}, nil
}

// Listen is listen(2).
func (s *Sock) Listen() error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.state != stateClosed {
		return fmt.Errorf("tcpaotest: listen on a %s socket: %w", s.state, eINVAL)
	}
	s.state = stateListen
	return nil
}

// Close is close(2); later calls fail with EBADF.
func (s *Sock) Close() error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	s.state, s.ao, s.md5 = stateGone, nil, nil
	if s.remote != nil {
		s.remote.remote, s.remote = nil, nil
	}
	return nil
}

// LocalAddr is the bound address and port.
func (s *Sock) LocalAddr() netip.AddrPort { return s.local }

// segment is the TCP-AO or TCP-MD5 option of one segment: nil for an
// unsigned one. An MD5-signed segment has md5 set and nothing else.
type segment struct {
	md5          *md5Key
	keyid, rnext uint8
	key          *mkt
	// options: the segment carries TCP options besides TCP-AO. A SYN and
	// a SYN-ACK do (MSS, window scale, SACK-permitted, the SYN's
	// timestamps); later segments of a TCP-AO connection do not, because
	// tcp_synack_options turns timestamps off when TCP-AO and SACK are on
	// (the model sends no SACK blocks: it loses no segment it goes on with).
	options bool
}

// sign is tcp_get_current_key's choice for a segment to s.peer: TCP-AO
// when the socket has it, else the MD5 key for the peer, else none.
func (s *Sock) sign() *segment {
	if s.ao == nil {
		if k := s.md5For(s.peer); k != nil {
			return &segment{md5: k}
		}
		return nil
	}
	if s.ao.current == nil || s.ao.rnext == nil {
		return nil
	}
	return &segment{keyid: s.ao.current.sndid, rnext: s.ao.rnext.rcvid, key: s.ao.current}
}

// signSYN is sign for a SYN, which carries other options.
func (s *Sock) signSYN() *segment {
	seg := s.sign()
	if seg != nil && seg.md5 == nil {
		seg.options = true
	}
	return seg
}

// hashesOptions says whether the exclude-options flag changes the bytes
// tcp_ao_hash_header hashes for seg: it does when the segment carries other
// options, or when the MAC length is not a multiple of 4 (the option is then
// padded with NOPs, which only the covering key hashes).
func (seg *segment) hashesOptions() bool {
	return seg.options || seg.key.maclen%4 != 0
}

// aoRequired is tcp_ao_required(): an unsigned segment from src is dropped.
func (s *Sock) aoRequired(src netip.Addr) bool {
	if s.ao == nil {
		return false
	}
	if s.ao.aoRequired || s.ao.lookup(0, src, 255, -1, -1) != nil {
		s.ao.aoRequiredCnt++
		return true
	}
	return false
}

// verify is tcp_ao_verify_hash: the MAC matches when both ends hold the same
// secret with the same algorithm and MAC length, the same option coverage
// when that changes what is hashed, and keys of the same family: a key's
// traffic keys come from its family's KDF (tcp_ao_calc_key_sk), so on a
// v4-mapped connection an IPv6 key (::/0) and the peer's IPv4 key differ.
func (s *Sock) verify(k *mkt, seg *segment) bool {
	w := seg.key
	if k.fp != w.fp || k.alg != w.alg || k.maclen != w.maclen || k.family != w.family ||
		(k.excludeOpt != w.excludeOpt && seg.hashesOptions()) {
		s.ao.bad++
		k.bad++
		return false
	}
	s.ao.good++
	k.good++
	return true
}

// receiveUnestablished is tcp_inbound_hash on a listener or a SYN_SENT socket.
func (s *Sock) receiveUnestablished(src netip.Addr, seg *segment) bool {
	if seg == nil {
		return !s.aoRequired(src) && s.md5Lookup(0, src) == nil
	}
	if seg.md5 != nil {
		return s.receiveMD5(src, seg)
	}
	if s.ao == nil {
		return false // TCP_AOUNEXPECTED, no counter
	}
	k := s.ao.lookup(0, src, 255, -1, int(seg.keyid))
	if k == nil {
		s.ao.keyNotFound++
		return false
	}
	return s.verify(k, seg)
}

// receiveEstablished is tcp_inbound_hash's fast path on an established
// socket, with the RNext-driven switch of Current_key.
func (s *Sock) receiveEstablished(src netip.Addr, seg *segment) bool {
	if seg == nil {
		return !s.aoRequired(src) && s.md5Lookup(0, src) == nil
	}
	if seg.md5 != nil {
		return s.receiveMD5(src, seg)
	}
	ao := s.ao
	if ao == nil {
		return false
	}
	k := ao.rnext
	if k == nil || k.rcvid != seg.keyid {
		if k = ao.established(-1, int(seg.keyid)); k == nil {
			ao.keyNotFound++
			return false
		}
	}
	if !s.verify(k, seg) {
		return false
	}
	if ao.current == nil || seg.rnext != ao.current.sndid {
		if nk := ao.established(int(seg.rnext), -1); nk != nil {
			ao.current = nk
		}
	}
	return true
}

// Connect connects c to the listener l the way tcp_v4_connect/tcp_v6_connect
// and the three-way handshake do, and returns the socket accept(2) gives on
// l. It fails with EKEYREJECTED (connect(2) itself) when c has TCP-AO keys but
// none for l's address (c is closed again, its keys now checked against l's
// address like a connected socket's), and with ErrTimeout when a segment of
// the handshake would be dropped; c then stays in SYN_SENT.
func (n *Net) Connect(c, l *Sock) (*Sock, error) { return n.ConnectTo(c, l, l.local.Addr()) }

// ConnectTo is Connect to the listener l at the address dst: one of the
// host's addresses a wildcard listener is reached at, possibly with an
// IPv6 zone (a link-local address on one link). Keys carry no zone: a
// key matches the address on every link, as the kernel's do.
func (n *Net) ConnectTo(c, l *Sock, dst netip.Addr) (*Sock, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.net != n || l.net != n {
		return nil, fmt.Errorf("tcpaotest: connect: sockets of another Net")
	}
	if c.state != stateClosed || l.state != stateListen {
		return nil, fmt.Errorf("tcpaotest: connect %s socket to %s socket: %w", c.state, l.state, eINVAL)
	}
	if c.family != l.family {
		return nil, fmt.Errorf("tcpaotest: connect across address families: %w", eAFNOSUPPORT)
	}
	src := c.local.Addr()
	c.peer = dst
	if c.md5 != nil {
		// tcp_connect: a peer with both kinds is ambiguous; an MD5 key
		// for the peer wins and TCP-AO is dropped, else keys for TCP-AO
		// (or ao_required) drop the MD5 list.
		needsAO := c.aoCovers(-1, dst)
		if c.md5For(dst) != nil {
			if c.ao != nil {
				for _, k := range c.ao.keys {
					c.omem -= k.size
				}
			}
			c.ao = nil
		} else if needsAO {
			c.md5 = nil
		}
	}
	if c.ao != nil {
		// tcp_connect: no key for the peer -> EKEYREJECTED. The failure
		// path of tcp_v4_connect/tcp_v6_connect closes the socket again
		// but keeps the destination address: later keys must match it.
		if c.ao.lookup(0, dst, 255, -1, -1) == nil {
			return nil, fmt.Errorf("tcpaotest: connect %s: %w", l.local, sysErr("connect", eKEYREJECTED))
		}
		c.ao.connectInit(c, dst)
	}
	c.state = stateSynSent
	timeout := func(what string) error {
		return fmt.Errorf("tcpaotest: connect %s -> %s: %s dropped: %w", c.local, l.local, what, ErrTimeout)
	}

	syn := c.signSYN()
	if !l.receiveUnestablished(src, syn) {
		return nil, timeout("SYN")
	}
	usedAO := syn != nil && syn.md5 == nil
	usedMD5 := syn != nil && syn.md5 != nil
	var synack *segment
	if usedMD5 {
		// tcp_v4_send_synack: signed with the listener's key for the peer.
		synack = &segment{md5: l.md5For(src)}
	}
	if usedAO {
		// tcp_make_synack: the key whose SendID the client asked for.
		k := l.ao.lookup(0, src, 255, int(syn.rnext), -1)
		if k == nil {
			return nil, timeout("SYN-ACK (no key with the client's RNextKeyID)")
		}
		synack = &segment{keyid: k.sndid, rnext: syn.keyid, key: k, options: true}
	}
	if !c.receiveUnestablished(dst, synack) {
		return nil, timeout("SYN-ACK")
	}
	c.state = stateEstablished
	if !l.receiveUnestablished(src, c.sign()) {
		return nil, timeout("ACK")
	}

	n.nextPort++
	a := &Sock{net: n, family: l.family, local: netip.AddrPortFrom(dst, l.local.Port()), peer: src, state: stateEstablished}
	if l.ao != nil && usedAO {
		ao := l.ao.copyAllMatching(a, src, syn)
		if ao == nil {
			return nil, timeout("accept (EKEYREJECTED: the listener lost the peer's keys)")
		}
		a.ao = ao
	}
	if k := l.md5Lookup(0, src); k != nil && usedMD5 {
		// tcp_v4_syn_recv_sock: the listener's key for the peer, copied
		// as a host key (tcp_md5_key_copy with prefix 32/128).
		cp := *k
		cp.addr, cp.prefix = src.Unmap(), src.Unmap().BitLen()
		a.md5 = []*md5Key{&cp}
	}
	a.remote, c.remote = c, a
	return a, nil
}

// connectInit is tcp_ao_connect_init: it drops the keys that do not
// match the peer dst and picks the first matching key as Current_key and
// RNext_key where none is set.
func (ao *aoInfo) connectInit(c *Sock, dst netip.Addr) {
	for _, k := range append([]*mkt(nil), ao.keys...) {
		if k.matches(0, dst, k.prefix, -1, -1) {
			continue
		}
		if ao.current == k {
			ao.current = nil
		}
		if ao.rnext == k {
			ao.rnext = nil
		}
		ao.unlink(k)
		c.omem -= k.size
	}
	first := ao.lookup(0, dst, 255, -1, -1)
	if ao.current == nil {
		ao.current = first
	}
	if ao.rnext == nil {
		ao.rnext = first
	}
}

// copyAllMatching is tcp_ao_copy_all_matching: the accepted socket a gets
// a copy of every listener key matching the peer src (counters reset), and
// Current_key/RNext_key as the client's SYN asked; nil when no key
// matches.
func (lao *aoInfo) copyAllMatching(a *Sock, src netip.Addr, syn *segment) *aoInfo {
	ao := &aoInfo{aoRequired: lao.aoRequired, acceptICMPs: lao.acceptICMPs}
	for _, k := range lao.keys {
		if !k.matches(0, src, k.prefix, -1, -1) {
			continue
		}
		cp := *k
		cp.good, cp.bad = 0, 0
		ao.linkHead(&cp)
		a.omem += cp.size
	}
	if len(ao.keys) == 0 {
		return nil
	}
	first := ao.keys[0]
	if ao.current = ao.established(int(syn.rnext), -1); ao.current == nil {
		ao.current = first
	}
	if ao.rnext = ao.established(-1, int(syn.keyid)); ao.rnext == nil {
		ao.rnext = first
	}
	return ao
}

// Exchange sends segments from a to b and back, n rounds, each signed with the
// sender's Current_key and carrying its RNext_key's RecvID: a message, its
// answer, and a's ACK of the answer (the real kernel sends it at once when
// the reader asks for TCP_QUICKACK, as the conformance KernelStack does). It
// returns ErrTimeout at the first segment the receiver drops.
func (n *Net) Exchange(a, b *Sock, rounds int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a.state != stateEstablished || b.state != stateEstablished ||
		a.peer != b.local.Addr() || b.peer != a.local.Addr() || a.family != b.family {
		return fmt.Errorf("tcpaotest: exchange between %s and %s sockets that are not connected to each other: %w", a.state, b.state, eINVAL)
	}
	for i := 0; i < rounds; i++ {
		if !b.receiveEstablished(a.local.Addr(), a.sign()) {
			return fmt.Errorf("tcpaotest: exchange round %d: segment %s -> %s dropped: %w", i, a.local, b.local, ErrTimeout)
		}
		if !a.receiveEstablished(b.local.Addr(), b.sign()) {
			return fmt.Errorf("tcpaotest: exchange round %d: segment %s -> %s dropped: %w", i, b.local, a.local, ErrTimeout)
		}
		// a acknowledges the answer with the key it may just have switched
		// to (the answer's RNextKeyID); a dropped ACK leaves b's data
		// unacknowledged.
		if !b.receiveEstablished(a.local.Addr(), a.sign()) {
			return fmt.Errorf("tcpaotest: exchange round %d: ACK %s -> %s dropped: %w", i, a.local, b.local, ErrTimeout)
		}
	}
	return nil
}
