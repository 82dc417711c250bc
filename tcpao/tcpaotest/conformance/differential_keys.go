package conformance

import (
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Peers a random key names, by socket family: valid hosts, prefixes and the
// any address, and invalid ones (host bits, an address with /0, the any
// address with a prefix, the other family).
var (
	peers4 = []string{"127.0.0.1/32", "127.0.0.2/32", "127.0.0.3/32", "127.0.0.0/8", "10.0.0.0/8", "0.0.0.0/0",
		"10.0.0.1/8", "10.0.0.0/0", "0.0.0.0/8", "::1/128"}
	peers6 = []string{"::1/128", "2001:db8::/32", "::/0", "127.0.0.1/32", "127.0.0.2/32", "127.0.0.0/8", "0.0.0.0/0",
		"::ffff:127.0.0.2/128", "::ffff:127.0.0.0/104", "2001:db8::1/32", "::/64", "::ffff:0.0.0.0/96"}
)

func (q *seq) randPeer(s *dsock) tcpao.KeyRef {
	ps := peers4
	if s.v6() {
		ps = peers6
	}
	r := tcpao.KeyRef{Peer: p(ps[q.rng.IntN(len(ps))]), SendID: q.randID(), RecvID: q.randID()}
	if s.peer != nil && q.rng.IntN(2) == 0 {
		r.Peer = hostOf(s.peer.local) // the established peer, most of the time
		if q.rng.IntN(8) == 0 {
			r.Peer = host(s.peer.local) // v4-mapped: EINVAL for a /128
		}
	}
	if q.rng.IntN(8) == 0 {
		r.IfIndex = []int{q.vrf, 1, 4242}[q.rng.IntN(3)]
	}
	return r
}

func (q *seq) randID() uint8 {
	if q.rng.IntN(10) == 0 {
		return uint8(q.rng.IntN(256))
	}
	return uint8(1 + q.rng.IntN(4))
}

func (q *seq) randAlg() tcpao.Algorithm {
	return []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128}[q.rng.IntN(4)]
}

func (q *seq) secret(alg tcpao.Algorithm, name string) tcpao.Secret {
	if alg == tcpao.CMACAES128 {
		return tcpao.NewSecret([]byte(fmt.Sprintf("%-16.16s", name)))
	}
	return tcpao.NewSecret([]byte("differential-" + name))
}

func (q *seq) key(peer netip.Prefix, send, recv uint8, alg tcpao.Algorithm, name string) tcpao.Key {
	return tcpao.Key{KeyRef: tcpao.KeyRef{Peer: peer, SendID: send, RecvID: recv}, Algorithm: alg, Secret: q.secret(alg, name)}
}

func (q *seq) randKey(s *dsock) tcpao.Key {
	alg := q.randAlg()
	k := tcpao.Key{KeyRef: q.randPeer(s), Algorithm: alg, Secret: q.secret(alg, []string{"pair", "other"}[q.rng.IntN(2)])}
	if q.rng.IntN(6) == 0 {
		// 13 is padded with NOPs; 17 and more do not fit a SYN.
		k.MACLen = []uint8{4, 12, 13, 16, 17, 32, 255}[q.rng.IntN(7)]
	}
	k.ExcludeOptions = q.rng.IntN(8) == 0
	return k
}

func (q *seq) add(s *dsock, k tcpao.Key, o tcpao.AddOptions) string {
	return q.do(fmt.Sprintf("%s.AddKey(%v xopt=%v, %+v)", s, k, k.ExcludeOptions, o), func(_ Stack, side func(*dsock) tcpao.Socket) string {
		return errClass(side(s).AddKey(k, o))
	})
}

func (q *seq) addKey(s *dsock) {
	o := tcpao.AddOptions{SetCurrent: q.rng.IntN(6) == 0, SetRNext: q.rng.IntN(6) == 0}
	q.add(s, q.randKey(s), o)
}

// existing returns the model's keys on s, to aim deletes and filters at.
func (q *seq) existing(s *dsock) []tcpao.KeyInfo {
	ks, _ := s.m.Keys(tcpao.KeyFilter{})
	return ks
}

func (q *seq) randRef(s *dsock) tcpao.KeyRef {
	if ks := q.existing(s); len(ks) > 0 && q.rng.IntN(4) != 0 {
		r := ks[q.rng.IntN(len(ks))].KeyRef
		if s.v6() && r.Peer.Addr().Is4() && q.rng.IntN(3) == 0 {
			// The same v4 peer spelled v4-mapped.
			r.Peer = netip.PrefixFrom(netip.AddrFrom16(r.Peer.Addr().As16()), r.Peer.Bits()+96)
		}
		return r
	}
	return q.randPeer(s)
}

func (q *seq) delKey(s *dsock) {
	d := tcpao.DelKey{KeyRef: q.randRef(s), Async: q.rng.IntN(4) == 0}
	if q.rng.IntN(5) == 0 {
		d.SetCurrent, d.Current = true, q.randID()
	}
	if q.rng.IntN(5) == 0 {
		d.SetRNext, d.RNext = true, q.randID()
	}
	q.do(fmt.Sprintf("%s.DelKey(%v async=%v cur=%v/%d rnext=%v/%d)", s, d.KeyRef, d.Async, d.SetCurrent, d.Current, d.SetRNext, d.RNext),
		func(_ Stack, side func(*dsock) tcpao.Socket) string {
			return errClass(side(s).DelKey(d))
		})
}

func (q *seq) setInfo(s *dsock) {
	var c tcpao.InfoChange
	if q.rng.IntN(3) == 0 {
		c.Current = ptr(q.randID())
	}
	if q.rng.IntN(3) == 0 {
		c.RNext = ptr(q.randID())
	}
	if q.rng.IntN(3) == 0 {
		c.AORequired = ptr(q.rng.IntN(2) == 0)
	}
	if q.rng.IntN(3) == 0 {
		c.AcceptICMPs = ptr(q.rng.IntN(2) == 0)
	}
	c.ResetCounters = q.rng.IntN(4) == 0
	q.do(fmt.Sprintf("%s.SetInfo(%s)", s, fmtChange(c)), func(_ Stack, side func(*dsock) tcpao.Socket) string {
		return errClass(side(s).SetInfo(c))
	})
}

func fmtChange(c tcpao.InfoChange) string {
	s := fmt.Sprintf("reset=%v", c.ResetCounters)
	if c.Current != nil {
		s += fmt.Sprintf(" cur=%d", *c.Current)
	}
	if c.RNext != nil {
		s += fmt.Sprintf(" rnext=%d", *c.RNext)
	}
	if c.AORequired != nil {
		s += fmt.Sprintf(" req=%v", *c.AORequired)
	}
	if c.AcceptICMPs != nil {
		s += fmt.Sprintf(" icmps=%v", *c.AcceptICMPs)
	}
	return s
}

func (q *seq) getKeys(s *dsock) {
	var f tcpao.KeyFilter
	switch q.rng.IntN(5) {
	case 0:
		f.Current = true
	case 1:
		f.RNext = true
	case 2:
		f.Current, f.RNext = true, true
	default:
		r := q.randRef(s)
		if q.rng.IntN(4) == 0 {
			// A wider (or any) prefix over the key's address.
			bits := q.rng.IntN(r.Peer.Bits() + 1)
			if pp, err := r.Peer.Addr().Prefix(bits); err == nil {
				r.Peer = pp
			}
		}
		f.Ref = &r
		f.Current = q.rng.IntN(10) == 0
	}
	desc := fmt.Sprintf("%s.Keys(cur=%v rnext=%v", s, f.Current, f.RNext)
	if f.Ref != nil {
		desc += fmt.Sprintf(" ref=%v", *f.Ref)
	}
	q.do(desc+")", func(_ Stack, side func(*dsock) tcpao.Socket) string {
		return fmtKeys(side(s).Keys(f))
	})
}

func ptr[T any](v T) *T { return &v }

// md5 adds (with one of two passwords) or deletes a TCP-MD5 key on s for a
// random peer: the kernel's MD5/AO rules (EKEYREJECTED both ways,
// ao_required refused beside an MD5 key) and what an MD5 key does to
// connects and exchanges then follow from the later steps.
func (q *seq) md5(s *dsock) {
	r := tcpao.MD5Ref{Peer: q.randPeer(s).Peer}
	if q.rng.IntN(8) == 0 {
		r.IfIndex = []int{q.vrf, 1}[q.rng.IntN(2)]
	}
	if q.rng.IntN(3) == 0 {
		q.do(fmt.Sprintf("%s.DelMD5(%v)", s, r), func(_ Stack, side func(*dsock) tcpao.Socket) string {
			return errClass(tcpao.DelMD5(side(s), r))
		})
		return
	}
	pw := []string{"md5-one", "md5-two"}[q.rng.IntN(2)]
	q.do(fmt.Sprintf("%s.AddMD5(%v %s)", s, r, pw), func(_ Stack, side func(*dsock) tcpao.Socket) string {
		return errClass(tcpao.AddMD5(side(s), tcpao.MD5Key{MD5Ref: r, Secret: tcpao.NewSecret([]byte(pw))}))
	})
}
