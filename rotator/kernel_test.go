package rotator

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The rotator's tests run on the in-memory kernel (tcpao/tcpaotest), the
// one that passes the same conformance table as the real kernel. testSock
// is one of its sockets with the counts the tests assert on; the kernel's
// behaviour (errors, key state, counters) is tcpaotest's alone.

// ourAddr (ourAddr6 for IPv6 peers) is the local address of the sockets
// under test; the keys' peer prefixes name the far ends.
var (
	ourAddr  = netip.MustParseAddr("203.0.113.1")
	ourAddr6 = netip.MustParseAddr("2001:db8:ffff::1")
)

// ourAddrFor is our address in the family of peer prefix p.
func ourAddrFor(p netip.Prefix) netip.Addr {
	if p.Addr().Is6() && !p.Addr().Is4In6() {
		return ourAddr6
	}
	return ourAddr
}

// testSock is a socket of the in-memory kernel with its far end (when
// established) and counts of the calls made on it: writes (AddKey, DelKey,
// SetInfo), key reads, and key reads with fingerprints.
type testSock struct {
	*tcpaotest.Sock
	net *tcpaotest.Net
	far *tcpaotest.Sock // the far end's socket of an established one

	mu sync.Mutex
	// keys are the keys installed through this socket (and by
	// newEstablished), by (SendID, RecvID): what the far end mirrors.
	keys                map[[2]uint8]tcpao.Key
	ops, reads, fpReads int
	// knownReads counts the fingerprinted reads that named the secrets
	// they expect (KeyFilter.Known).
	knownReads int
}

var _ tcpao.Socket = (*testSock)(nil)

func (s *testSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	s.count(&s.ops)
	err := s.Sock.AddKey(k, o)
	if err == nil {
		s.mu.Lock()
		if s.keys == nil {
			s.keys = map[[2]uint8]tcpao.Key{}
		}
		s.keys[[2]uint8{k.SendID, k.RecvID}] = k
		s.mu.Unlock()
	}
	return err
}

func (s *testSock) DelKey(d tcpao.DelKey) error {
	s.count(&s.ops)
	return s.Sock.DelKey(d)
}

func (s *testSock) SetInfo(c tcpao.InfoChange) error {
	s.count(&s.ops)
	return s.Sock.SetInfo(c)
}

func (s *testSock) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	s.count(&s.reads)
	if !f.SkipFingerprint {
		s.count(&s.fpReads)
		if f.Known != nil {
			s.count(&s.knownReads)
		}
	}
	return s.Sock.Keys(f)
}

func (s *testSock) count(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

// counts returns the writes, reads and fingerprinted reads so far.
func (s *testSock) counts() (ops, reads, fpReads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops, s.reads, s.fpReads
}

// resetOps zeroes the write count.
func (s *testSock) resetOps() {
	s.mu.Lock()
	s.ops = 0
	s.mu.Unlock()
}

// newListener is a listening socket on ourAddr6, without keys: an AF_INET6
// socket, like a BGP speaker's dual-stack listener, takes keys for IPv4 and
// IPv6 peers.
func newListener(opts ...tcpaotest.Option) *testSock {
	n := tcpaotest.NewNet(opts...)
	s, err := n.Socket(ourAddr6)
	if err != nil {
		panic(err)
	}
	if err := s.Listen(); err != nil {
		panic(err)
	}
	return &testSock{Sock: s, net: n}
}

// farAddr is the far end's address for keys of peer prefix p.
func farAddr(p netip.Prefix) netip.Addr {
	if p.IsSingleIP() {
		return p.Addr()
	}
	return p.Masked().Addr().Next()
}

// mirror is k as the far end holds it: IDs swapped, its peer ourAddr.
func mirror(k tcpao.Key) tcpao.Key {
	m := k
	m.SendID, m.RecvID = k.RecvID, k.SendID
	us := ourAddrFor(k.Peer)
	m.Peer = netip.PrefixFrom(us, us.BitLen())
	m.IfIndex = 0
	return m
}

// newEstablished is a connected socket (ourAddr to the far end the keys
// name) that carries keys, installed before connect; the first is
// Current_key and RNext_key. The far end holds their mirrors. The
// handshake's segments are verified with the first key, as the kernel's
// would be. Without keys the connection has no TCP-AO.
func newEstablished(keys ...tcpao.Key) *testSock {
	n := tcpaotest.NewNet()
	far, us := netip.MustParseAddr("192.0.2.2"), ourAddr
	if len(keys) > 0 {
		far, us = farAddr(keys[0].Peer), ourAddrFor(keys[0].Peer)
	}
	l, err := n.Socket(far)
	if err != nil {
		panic(err)
	}
	c, err := n.Socket(us)
	if err != nil {
		panic(err)
	}
	for i, k := range keys {
		if err := c.AddKey(k, tcpao.AddOptions{SetCurrent: i == 0, SetRNext: i == 0}); err != nil {
			panic(err)
		}
		if err := l.AddKey(mirror(k), tcpao.AddOptions{}); err != nil {
			panic(err)
		}
	}
	if err := l.Listen(); err != nil {
		panic(err)
	}
	a, err := n.Connect(c, l)
	if err != nil {
		panic(err)
	}
	ks := map[[2]uint8]tcpao.Key{}
	for _, k := range keys {
		ks[[2]uint8{k.SendID, k.RecvID}] = k
	}
	return &testSock{Sock: c, net: n, far: a, keys: ks}
}

// peerSends delivers n segments from the far end signed with its key whose
// SendID is recv (our key with that RecvID), asking for our current key
// (so that Current_key stays): the kernel counts them on our key. The far
// end first takes the mirror of our current key when it lacks it.
func (s *testSock) peerSends(recv uint8, n int) {
	in, err := s.Sock.Info()
	setup(err)
	cur := in.CurrentKey
	if ks, _ := s.Sock.Keys(tcpao.KeyFilter{Current: true}); len(ks) == 1 {
		s.mu.Lock()
		k, ok := s.keys[[2]uint8{ks[0].SendID, ks[0].RecvID}]
		s.mu.Unlock()
		if ok {
			s.farHas(k)
		}
	}
	setup(s.far.SetInfo(tcpao.InfoChange{Current: &recv, RNext: &cur}))
	for range n {
		seg, err := s.net.Sign(s.far)
		setup(err)
		setup(s.net.Deliver(seg, s.Sock))
	}
}

// farHas gives the far end the mirror of our key k, unless it holds it.
func (s *testSock) farHas(k tcpao.Key) {
	if err := s.far.AddKey(mirror(k), tcpao.AddOptions{}); err != nil && !errors.Is(err, syscall.EEXIST) {
		panic(err)
	}
}

// current returns our socket's Current_key and RNext_key (SendID, RecvID).
func (s *testSock) current() (cur, rnext OptID) {
	in, err := s.Sock.Info()
	if err != nil {
		return OptID{}, OptID{}
	}
	if in.HaveCurrent {
		cur = ID(in.CurrentKey)
	}
	if in.HaveRNext {
		rnext = ID(in.RNextKey)
	}
	return cur, rnext
}

// pair is both ends of one connection that carries keys: x as
// newEstablished makes it, y the far end (the keys' mirrors: with equal
// send and receive IDs, the same IDs), each with its own counts.
func pair(keys ...tcpao.Key) (x, y *testSock) {
	x = newEstablished(keys...)
	y = &testSock{Sock: x.far, net: x.net, far: x.Sock}
	return x, y
}

// sendTo carries one segment from s to o, its far end, as the kernel
// would (o verifies it, counts it, and follows its RNextKeyID); false
// when o dropped it.
func (s *testSock) sendTo(o *testSock) bool {
	seg, err := s.net.Sign(s.Sock)
	if err != nil {
		return false
	}
	return s.net.Deliver(seg, o.Sock) == nil
}

// peerBadMAC delivers n segments from the far end whose KeyID names our
// current key but whose MAC does not verify, as a far end with another
// secret under that key's IDs would: the kernel counts them bad on our key
// and socket. The far end moves to a spare key, replaces its key under
// those IDs by one with another secret, sends, and puts its own key back.
func (s *testSock) peerBadMAC(n int) {
	in, err := s.Sock.Info()
	setup(err)
	ks, err := s.Sock.Keys(tcpao.KeyFilter{Current: true})
	if err != nil || len(ks) != 1 {
		panic(fmt.Sprint("no current key: ", err))
	}
	cur := in.CurrentKey
	s.mu.Lock()
	orig, ok := s.keys[[2]uint8{ks[0].SendID, ks[0].RecvID}]
	s.mu.Unlock()
	if !ok {
		panic("peerBadMAC: the current key was not installed by newEstablished")
	}
	far := mirror(orig)
	spare := far
	spare.SendID, spare.RecvID, spare.Secret = 250, 250, tcpao.NewSecret([]byte("spare"))
	wrong := far
	wrong.Secret = tcpao.NewSecret([]byte("not the secret at all"))
	swap := func(to tcpao.Key) {
		setup(s.far.DelKey(tcpao.DelKey{KeyRef: far.KeyRef, SetCurrent: true, Current: 250, SetRNext: true, RNext: 250}))
		setup(s.far.AddKey(to, tcpao.AddOptions{}))
		setup(s.far.SetInfo(tcpao.InfoChange{Current: &far.SendID, RNext: &cur}))
	}
	setup(s.far.AddKey(spare, tcpao.AddOptions{}))
	swap(wrong)
	for range n {
		seg, err := s.net.Sign(s.far)
		setup(err)
		_ = s.net.Deliver(seg, s.Sock) // dropped: bad MAC
	}
	swap(far)
	setup(s.far.DelKey(tcpao.DelKey{KeyRef: spare.KeyRef}))
}

// setup panics on err: set-up the tests rely on.
func setup(err error) {
	if err != nil {
		panic(err)
	}
}

// peerSendsWith is peerSends with our key k, the far end first taking its
// mirror when it does not hold it yet (a far end that installed the new
// key of a roll).
func (s *testSock) peerSendsWith(k tcpao.Key, n int) {
	s.farHas(k)
	s.peerSends(k.RecvID, n)
}

// readCount and fpReadCount are the key reads so far, and those that
// asked for fingerprints.
func (s *testSock) readCount() int   { _, r, _ := s.counts(); return r }
func (s *testSock) fpReadCount() int { _, _, f := s.counts(); return f }

// writes is the writes (AddKey, DelKey, SetInfo) so far.
func (s *testSock) writes() int { o, _, _ := s.counts(); return o }

// hasAO reports whether the socket has TCP-AO (TCP_AO_INFO answers).
func (s *testSock) hasAO() bool {
	_, err := s.Sock.Info()
	return err == nil
}

// peerSendsKey is peerSendsWith for our key with these IDs, one installed
// through this socket.
func (s *testSock) peerSendsKey(send, recv uint8, n int) {
	s.mu.Lock()
	k, ok := s.keys[[2]uint8{send, recv}]
	s.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("peerSendsKey: no key %d/%d installed through the socket", send, recv))
	}
	s.peerSendsWith(k, n)
}

// synTo connects a far end holding the mirror of k to listener l, signed
// with it: the listener verifies the SYN with its key under k's IDs
// (pkt_good). With wrong the far end's key has another secret under those
// IDs, and the listener counts the SYN bad (pkt_bad). It reports whether
// the connection was accepted. The far end's address is the one k's
// prefix names (farAddr); l must be of k's address family.
func synTo(l *testSock, k tcpao.Key, wrong bool) bool {
	c, err := l.net.Socket(farAddr(k.Peer))
	setup(err)
	defer c.Close()
	m := mirror(k)
	if wrong {
		m.Secret = tcpao.NewSecret([]byte("not the listener's secret"))
	}
	setup(c.AddKey(m, tcpao.AddOptions{}))
	a, err := l.net.Connect(c, l.Sock)
	if err != nil {
		return false
	}
	_ = a.Close()
	return true
}
