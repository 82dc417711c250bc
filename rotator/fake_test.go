package rotator

import (
	"sync"
	"syscall"

	"github.com/aokeyd/aokeyd/tcpao"
)

// fakeSock is a small in-memory model of the kernel's TCP-AO rules
// (net/ipv4/tcp_ao.c) used until tcpao/tcpaotest lands: EEXIST on
// overlapping IDs, EBUSY when deleting current/rnext without replacement,
// EINVAL for del_async off a listener and current/rnext on a listener,
// EISCONN for a first key on an established socket, ENOMEM past optmem.
// It also carries segments between two sockets (send) so that the RNext
// protocol and per-key counters behave like the kernel's.
type fakeSock struct {
	mu       sync.Mutex
	listen   bool
	ao       bool
	keys     []*fakeKey
	cur, rnx *fakeKey
	required bool
	good     uint64
	bad      uint64
	notFound uint64
	optmem   int // 0: unlimited
	used     int
	ops      int
	// reads and fpReads count GET_KEYS calls, and those that asked for
	// the keys' fingerprints.
	reads, fpReads int
}

type fakeKey struct {
	k         tcpao.Key
	good, bad uint64
	fp        tcpao.Fingerprint
}

func newFakeListener() *fakeSock { return &fakeSock{listen: true} }

// newFakeEstablished returns a connected socket that already carries keys
// (as if they had been installed before connect).
func newFakeEstablished(keys ...tcpao.Key) *fakeSock {
	s := &fakeSock{}
	for _, k := range keys {
		s.insert(k)
	}
	if len(keys) > 0 {
		s.ao = true
		s.cur, s.rnx = s.keys[0], s.keys[0]
	}
	return s
}

func (s *fakeSock) insert(k tcpao.Key) *fakeKey {
	k.KeyRef = normRef(k.KeyRef)
	k.Secret = k.Secret.Clone()
	fk := &fakeKey{k: k, fp: k.Secret.Fingerprint()}
	s.keys = append(s.keys, fk)
	s.used += tcpao.KeyOptMem(k.Algorithm)
	return fk
}

func (s *fakeSock) bySend(id uint8) *fakeKey {
	for _, k := range s.keys {
		if k.k.SendID == id {
			return k
		}
	}
	return nil
}

func (s *fakeSock) byRecv(id uint8) *fakeKey {
	for _, k := range s.keys {
		if k.k.RecvID == id {
			return k
		}
	}
	return nil
}

func (s *fakeSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops++
	if k.Validate() != nil {
		return syscall.EINVAL
	}
	if (o.SetCurrent || o.SetRNext) && s.listen {
		return syscall.EINVAL
	}
	if !s.listen && !s.ao {
		return syscall.EISCONN
	}
	r := normRef(k.KeyRef)
	for _, e := range s.keys {
		if conflicts(e.k.KeyRef, r) {
			return syscall.EEXIST
		}
	}
	if s.optmem > 0 && s.used+tcpao.KeyOptMem(k.Algorithm) >= s.optmem {
		return syscall.ENOMEM
	}
	s.ao = true
	fk := s.insert(k)
	if o.SetCurrent {
		s.cur = fk
	}
	if o.SetRNext {
		s.rnx = fk
	}
	return nil
}

func (s *fakeSock) DelKey(d tcpao.DelKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops++
	if (d.SetCurrent || d.SetRNext) && s.listen {
		return syscall.EINVAL
	}
	if !s.ao {
		return syscall.ENOENT
	}
	var nc, nr *fakeKey
	if d.SetCurrent {
		if nc = s.bySend(d.Current); nc == nil {
			return syscall.ENOENT
		}
	}
	if d.SetRNext {
		if nr = s.byRecv(d.RNext); nr == nil {
			return syscall.ENOENT
		}
	}
	if d.Async && !s.listen {
		return syscall.EINVAL
	}
	r := normRef(d.KeyRef)
	for i, k := range s.keys {
		if k.k.KeyRef != r || k == nc || k == nr {
			continue
		}
		if !d.Async {
			if nc != nil {
				s.cur = nc
			}
			if nr != nil {
				s.rnx = nr
			}
			if s.cur == k || s.rnx == k {
				return syscall.EBUSY
			}
		} else {
			if s.cur == k {
				s.cur = nil
			}
			if s.rnx == k {
				s.rnx = nil
			}
		}
		s.keys = append(s.keys[:i:i], s.keys[i+1:]...)
		s.used -= tcpao.KeyOptMem(k.k.Algorithm)
		return nil
	}
	return syscall.ENOENT
}

func (s *fakeSock) Info() (tcpao.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ao {
		return tcpao.Info{}, syscall.ENOENT
	}
	in := tcpao.Info{AORequired: s.required, PktGood: s.good, PktBad: s.bad, PktKeyNotFound: s.notFound}
	if !s.listen && s.cur != nil {
		in.HaveCurrent, in.CurrentKey = true, s.cur.k.SendID
	}
	if !s.listen && s.rnx != nil {
		in.HaveRNext, in.RNextKey = true, s.rnx.k.RecvID
	}
	return in, nil
}

func (s *fakeSock) SetInfo(c tcpao.InfoChange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops++
	if (c.Current != nil || c.RNext != nil) && s.listen {
		return syscall.EINVAL
	}
	if !s.ao && !s.listen {
		return syscall.EINVAL
	}
	var nc, nr *fakeKey
	if c.Current != nil {
		if nc = s.bySend(*c.Current); nc == nil {
			return syscall.ENOENT
		}
	}
	if c.RNext != nil {
		if nr = s.byRecv(*c.RNext); nr == nil {
			return syscall.ENOENT
		}
	}
	s.ao = true
	if c.AORequired != nil {
		s.required = *c.AORequired
	}
	if nc != nil {
		s.cur = nc
	}
	if nr != nil {
		s.rnx = nr
	}
	return nil
}

func (s *fakeSock) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ao {
		return nil, syscall.ENOENT
	}
	s.reads++
	if !f.SkipFingerprint {
		s.fpReads++
	}
	var out []tcpao.KeyInfo
	for _, k := range s.keys {
		isCur := !s.listen && k == s.cur
		isRN := !s.listen && k == s.rnx
		if (f.Current && !isCur) || (f.RNext && !isRN) || (f.Ref != nil && normRef(*f.Ref) != k.k.KeyRef) {
			continue
		}
		out = append(out, tcpao.KeyInfo{KeyRef: k.k.KeyRef, Algorithm: k.k.Algorithm, MACLen: macLen(k.k.MACLen),
			ExcludeOptions: k.k.ExcludeOptions, Fingerprint: k.fp, IsCurrent: isCur, IsRNext: isRN,
			PktGood: k.good, PktBad: k.bad})
		if f.SkipFingerprint {
			out[len(out)-1].Fingerprint = tcpao.Fingerprint{}
		}
	}
	return out, nil
}

// send carries one segment from s to peer, as the kernel would: the segment
// carries KeyID = s.current.SendID and RNextKeyID = s.rnext.RecvID; peer
// verifies with its key whose RecvID is KeyID and, on success, switches its
// current to the key whose SendID is RNextKeyID. It reports whether the
// segment verified.
func (s *fakeSock) send(peer *fakeSock) bool {
	s.mu.Lock()
	cur, rnx := s.cur, s.rnx
	s.mu.Unlock()
	if cur == nil || rnx == nil {
		return false
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	k := peer.byRecv(cur.k.SendID)
	if k == nil {
		peer.notFound++
		return false
	}
	if k.fp != cur.fp || k.k.Algorithm != cur.k.Algorithm {
		k.bad++
		peer.bad++
		return false
	}
	k.good++
	peer.good++
	if peer.cur == nil || rnx.k.RecvID != peer.cur.k.SendID {
		if n := peer.bySend(rnx.k.RecvID); n != nil {
			peer.cur = n
		}
	}
	return true
}

func (s *fakeSock) state() (cur, rnx *fakeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.rnx
}
