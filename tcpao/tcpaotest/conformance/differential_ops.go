package conformance

import (
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

const maxSocks = 8

// step runs one random operation (a pairing runs several).
func (q *seq) step() {
	if len(q.socks) == 0 || (len(q.socks) < maxSocks && q.rng.IntN(10) == 0) {
		q.newSocket(q.randLocal(q.rng.IntN(4) == 0))
		return
	}
	switch x := q.rng.IntN(100); {
	case x < 8 && len(q.socks) <= maxSocks-3:
		q.pairUp()
	case x < 13:
		if s := q.pick(stClosed); s != nil {
			q.listen(s)
		}
	case x < 18:
		q.randomConnect()
	case x < 28:
		q.exchange()
	case x < 33:
		q.pairKey()
	case x < 55:
		q.addKey(q.target())
	case x < 72:
		q.delKey(q.target())
	case x < 82:
		q.setInfo(q.target())
	case x < 88:
		q.getKeys(q.target())
	case x < 94:
		q.md5(q.target())
	default:
		s := q.target()
		q.do(fmt.Sprintf("%s.Info()", s), func(_ Stack, side func(*dsock) tcpao.Socket) string {
			return fmtInfo(side(s).Info())
		})
	}
}

var lo4s = []netip.Addr{lo4, cli4, oth4}

// randLocal is a local address: IPv4 loopback, or for v6 the IPv6 loopback
// or (a third of the time) a v4-mapped IPv4 loopback address.
func (q *seq) randLocal(v6 bool) netip.Addr {
	a := lo4s[q.rng.IntN(len(lo4s))]
	switch {
	case !v6:
		return a
	case q.rng.IntN(3) == 0:
		return netip.AddrFrom16(a.As16())
	}
	return lo6
}

// sameNet says whether c can connect to l: the same family, and for IPv6
// both v4-mapped or neither.
func sameNet(c, l *dsock) bool {
	return c.v6() == l.v6() && c.local.Is4In6() == l.local.Is4In6()
}

// hostOf is a key's peer for the socket at a: v4-mapped addresses are given
// as IPv4 (the binding sends them v4-mapped with an IPv4 prefix length).
func hostOf(a netip.Addr) netip.Prefix { return host(a.Unmap()) }

func (q *seq) any() *dsock { return q.socks[q.rng.IntN(len(q.socks))] }

// target is the socket of a key operation: an established one half of the
// time when there is one.
func (q *seq) target() *dsock {
	if q.rng.IntN(2) == 0 {
		if s := q.pick(stEstablished); s != nil {
			return s
		}
	}
	return q.any()
}

// pairKey adds a key with the same secret on both ends of a connection, as a
// rotation does, sometimes making it Current or RNext on one end.
func (q *seq) pairKey() {
	a := q.pick(stEstablished)
	if a == nil {
		return
	}
	b := a.peer
	snd, rcv, alg := q.randID(), q.randID(), q.randAlg()
	o := tcpao.AddOptions{SetCurrent: q.rng.IntN(4) == 0, SetRNext: q.rng.IntN(4) == 0}
	q.add(a, q.key(hostOf(b.local), snd, rcv, alg, "pair"), o)
	q.add(b, q.key(hostOf(a.local), rcv, snd, alg, "pair"), tcpao.AddOptions{})
}

// pick returns a random socket in state st, nil when there is none.
func (q *seq) pick(st sockState) *dsock {
	var c []*dsock
	for _, s := range q.socks {
		if s.st == st {
			c = append(c, s)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[q.rng.IntN(len(c))]
}

func (q *seq) newSocket(local netip.Addr) *dsock {
	s := &dsock{id: q.next, local: local}
	q.next++
	var failed bool
	q.do(fmt.Sprintf("s%d = Socket(%s)", s.id, local), func(st Stack, side func(*dsock) tcpao.Socket) string {
		so, err := st.Socket(local)
		if err != nil {
			failed = true
			q.err = fmt.Errorf("differential: socket(%s): %w", local, err)
			return "socket " + errClass(err)
		}
		if st == q.m {
			s.m = so
		} else {
			s.r = so
		}
		return "ok"
	})
	if failed || q.div != nil {
		q.div = nil
		return nil
	}
	q.socks = append(q.socks, s)
	return s
}

func (q *seq) listen(s *dsock) {
	r := q.do(fmt.Sprintf("Listen(%s)", s), func(st Stack, side func(*dsock) tcpao.Socket) string {
		return errClass(st.Listen(side(s)))
	})
	if r == "ok" {
		s.st = stListen
	}
}

// pairUp makes a listener and a client with matching keys and connects them.
func (q *seq) pairUp() {
	v6 := q.rng.IntN(3) == 0
	l := q.newSocket(q.randLocal(v6))
	if l == nil {
		return
	}
	cl := q.randLocal(v6)
	if l.local.Is4In6() != cl.Is4In6() {
		cl = q.randLocal(v6)
		if l.local.Is4In6() {
			cl = netip.AddrFrom16(lo4s[q.rng.IntN(len(lo4s))].As16())
		} else if v6 {
			cl = lo6
		}
	}
	c := q.newSocket(cl)
	if c == nil {
		return
	}
	snd, rcv := uint8(1+q.rng.IntN(3)), uint8(1+q.rng.IntN(3))
	alg := q.randAlg()
	kl := q.key(hostOf(c.local), rcv, snd, alg, "pair")
	kc := q.key(hostOf(l.local), snd, rcv, alg, "pair")
	if q.rng.IntN(8) == 0 {
		kc.Secret = q.secret(alg, "other")
	}
	q.add(l, kl, tcpao.AddOptions{})
	q.add(c, kc, tcpao.AddOptions{})
	if q.rng.IntN(3) == 0 {
		// A second MKT, and a client that starts on either.
		snd2, rcv2 := uint8(4+q.rng.IntN(3)), uint8(4+q.rng.IntN(3))
		q.add(l, q.key(hostOf(c.local), rcv2, snd2, alg, "pair"), tcpao.AddOptions{})
		o := tcpao.AddOptions{SetCurrent: q.rng.IntN(2) == 0, SetRNext: q.rng.IntN(2) == 0}
		q.add(c, q.key(hostOf(l.local), snd2, rcv2, alg, "pair"), o)
	}
	q.listen(l)
	if q.div == nil {
		q.connect(c, l)
	}
}

func (q *seq) randomConnect() {
	l := q.pick(stListen)
	if l == nil {
		return
	}
	var cs []*dsock
	for _, s := range q.socks {
		if s.st == stClosed && sameNet(s, l) {
			cs = append(cs, s)
		}
	}
	if len(cs) == 0 {
		if len(q.socks) >= maxSocks {
			return
		}
		local := q.randLocal(l.v6())
		if l.local.Is4In6() {
			local = netip.AddrFrom16(lo4s[q.rng.IntN(len(lo4s))].As16())
		} else if l.v6() {
			local = lo6
		}
		c := q.newSocket(local)
		if c == nil {
			return
		}
		cs = append(cs, c)
	}
	q.connect(cs[q.rng.IntN(len(cs))], l)
}

func (q *seq) setTimeout(st Stack, expectOK bool) {
	if ts, ok := st.(timeoutSetter); ok && st == q.r {
		if expectOK {
			ts.SetTimeout(diffLong)
		} else {
			ts.SetTimeout(diffShort)
		}
	}
}

func (q *seq) connect(c, l *dsock) {
	var am, ar tcpao.Socket
	var modelOK bool
	res := q.do(fmt.Sprintf("Connect(%s, %s)", c, l), func(st Stack, side func(*dsock) tcpao.Socket) string {
		q.setTimeout(st, modelOK)
		a, err := st.Connect(side(c), side(l))
		if st == q.m {
			am, modelOK = a, err == nil
		} else {
			ar = a
		}
		return errClass(err)
	})
	if res == "timeout" {
		// A half-open connection retransmits behind the sequence's back.
		q.close(c)
		return
	}
	if res != "ok" || am == nil || ar == nil {
		return // connect(2) failed: the socket is closed again
	}
	a := &dsock{id: q.next, m: am, r: ar, local: l.local, st: stEstablished, peer: c, accepted: true}
	q.next++
	c.st, c.peer = stEstablished, a
	q.socks = append(q.socks, a)
}

func (q *seq) exchange() {
	a := q.pick(stEstablished)
	if a == nil {
		return
	}
	b := a.peer
	n := 1 + q.rng.IntN(3)
	var modelOK bool
	res := q.do(fmt.Sprintf("Exchange(%s, %s, %d)", a, b, n), func(st Stack, side func(*dsock) tcpao.Socket) string {
		q.setTimeout(st, modelOK)
		err := st.Exchange(side(a), side(b), n)
		if st == q.m {
			modelOK = err == nil
		}
		return errClass(err)
	})
	if res != "ok" {
		// The client end first: the accepted end's RST then finds no
		// socket, where the client's would reach the listener's port.
		if a.accepted {
			a, b = b, a
		}
		q.close(a)
		q.close(b)
	}
}

// close closes s on both stacks and forgets it.
func (q *seq) close(s *dsock) {
	for i, x := range q.socks {
		if x == s {
			q.socks = append(q.socks[:i:i], q.socks[i+1:]...)
			break
		}
	}
	for _, p := range []struct {
		st Stack
		so tcpao.Socket
	}{{q.m, s.m}, {q.r, s.r}} {
		if c, ok := p.st.(socketCloser); ok && p.so != nil {
			if err := c.CloseSocket(p.so); err != nil && q.err == nil {
				q.err = fmt.Errorf("differential: close: %w", err)
			}
		}
	}
}
