package conformance

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// md5Ref is the MD5 key reference for peer.
func md5Ref(peer netip.Prefix) tcpao.MD5Ref { return tcpao.MD5Ref{Peer: peer} }

// addMD5 installs an MD5 key for peer with a password derived from name.
func (e env) addMD5(s tcpao.Socket, peer netip.Prefix, name string) error {
	e.t.Helper()
	m, err := tcpao.MD5(s)
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return m.AddMD5(tcpao.MD5Key{MD5Ref: md5Ref(peer), Secret: tcpao.NewSecret([]byte("md5-password-" + name))})
}

func (e env) mustMD5(s tcpao.Socket, peer netip.Prefix, name string) {
	e.t.Helper()
	if err := e.addMD5(s, peer, name); err != nil {
		e.t.Fatalf("AddMD5(%s): %v", peer, err)
	}
}

func (e env) delMD5(s tcpao.Socket, peer netip.Prefix) error {
	e.t.Helper()
	m, err := tcpao.MD5(s)
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return m.DelMD5(md5Ref(peer))
}

// dial makes a socket on local, lets prep key it, and connects it to l:
// the accepted socket, or the error (ErrTimeout when a segment was
// dropped).
func (e env) dial(local netip.Addr, l tcpao.Socket, prep func(c tcpao.Socket)) (c, a tcpao.Socket, err error) {
	e.t.Helper()
	c = e.socket(local)
	if prep != nil {
		prep(c)
	}
	a, err = e.s.Connect(c, l)
	return c, a, err
}

// wantDial checks that a dial connected (want true) or timed out.
func (e env) wantDial(what string, err error, connects bool) {
	e.t.Helper()
	switch {
	case connects && err != nil:
		e.t.Fatalf("%s: %v, want connected", what, err)
	case !connects && err == nil:
		e.t.Fatalf("%s: connected, want the SYN dropped", what)
	case !connects && !errors.Is(err, ErrTimeout):
		e.t.Fatalf("%s: %v, want %v", what, err, ErrTimeout)
	}
}

// The ways a client to the v4 listener lo4 signs its SYN.
func (e env) md5To(name string) func(tcpao.Socket) {
	return func(c tcpao.Socket) { e.mustMD5(c, host(lo4), name) }
}

func (e env) aoTo(name string, send, recv uint8) func(tcpao.Socket) {
	return func(c tcpao.Socket) { e.add(c, mk(host(lo4), send, recv, name), tcpao.AddOptions{}) }
}

// md5Cases are the kernel's rules for TCP-MD5 beside TCP-AO (issue 34):
// which keys a listener takes for the same, overlapping and different
// peers, which kind an incoming SYN is checked against, what ao_required
// does, and what an established MD5 connection refuses. aokeyd's MD5 to
// TCP-AO migration is built on exactly these answers.
func md5Cases() []Case {
	p8, p30 := p("127.0.0.0/8"), p("127.0.0.0/30")
	return []Case{
		{"md5/same-peer-ao-after-md5-ekeyrejected", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.wantErr("AO add for the MD5 peer", l.AddKey(mk(host(cli4), 1, 2, "x"), tcpao.AddOptions{}), eKEYREJECTED)
		}},
		{"md5/same-peer-md5-after-ao-ekeyrejected", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.add(l, mk(host(cli4), 1, 2, "x"), tcpao.AddOptions{})
			e.wantErr("MD5 add for the AO peer", e.addMD5(l, host(cli4), "a"), eKEYREJECTED)
		}},
		{"md5/md5-prefix-refuses-ao-host-inside", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, p8, "a")
			e.wantErr("AO add inside the MD5 /8", l.AddKey(mk(host(cli4), 1, 2, "x"), tcpao.AddOptions{}), eKEYREJECTED)
		}},
		{"md5/ao-prefix-refuses-md5-host-inside", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.add(l, mk(p30, 1, 2, "x"), tcpao.AddOptions{})
			e.wantErr("MD5 add inside the AO /30", e.addMD5(l, host(cli4), "a"), eKEYREJECTED)
		}},
		{"md5/ao-required-refuses-md5-add", func(t *testing.T, e env) {
			l := e.socket(lo4)
			if err := l.SetInfo(tcpao.InfoChange{AORequired: bl(true)}); err != nil {
				t.Fatal(err)
			}
			e.wantErr("MD5 add on an ao_required socket", e.addMD5(l, host(cli4), "a"), eKEYREJECTED)
		}},
		{"md5/different-peers-each-checked-against-its-kind", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.add(l, mk(host(oth4), 2, 1, "x"), tcpao.AddOptions{})
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, a, err := e.dial(cli4, l, e.md5To("a"))
			e.wantDial("MD5 SYN from the MD5 peer", err, true)
			if _, err := a.Info(); !errors.Is(err, eNOENT) {
				t.Fatalf("accepted MD5 connection has TCP-AO: Info = %v", err)
			}
			_, a, err = e.dial(oth4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN from the AO peer", err, true)
			e.info(a)
			_, _, err = e.dial(cli4, l, nil)
			e.wantDial("unsigned SYN from the MD5 peer", err, false)
			_, _, err = e.dial(cli4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN from the MD5 peer", err, false)
			_, _, err = e.dial(oth4, l, e.md5To("a"))
			e.wantDial("MD5 SYN from the AO peer", err, false)
			_, _, err = e.dial(oth4, l, nil)
			e.wantDial("unsigned SYN from the AO peer", err, false)
			_, _, err = e.dial(cli4, l, e.md5To("wrong"))
			e.wantDial("MD5 SYN with the wrong password", err, false)
		}},
		{"md5/ao-prefix-beside-md5-host-takes-both-kinds", func(t *testing.T, e env) {
			// The MD5 key first; an AO key for a prefix whose first
			// address lies outside it is taken, and the MD5 peer may then
			// connect with either kind, never unsigned: the prepared
			// step of a migration.
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.add(l, mk(p30, 2, 1, "x"), tcpao.AddOptions{})
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			c, a, err := e.dial(cli4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN from the MD5 peer", err, true)
			e.wantKeys("accepted AO connection", e.keys(a, tcpao.KeyFilter{}), want{k: mk(p30, 2, 1, "x"), cur: true, rnext: true, name: "x"})
			e.exchange(c, a, 2)
			_, a, err = e.dial(cli4, l, e.md5To("a"))
			e.wantDial("MD5 SYN from the MD5 peer", err, true)
			if _, err := a.Info(); !errors.Is(err, eNOENT) {
				t.Fatalf("accepted MD5 connection has TCP-AO: Info = %v", err)
			}
			_, _, err = e.dial(cli4, l, nil)
			e.wantDial("unsigned SYN from the MD5 peer", err, false)
			_, _, err = e.dial(cli4, l, e.md5To("wrong"))
			e.wantDial("MD5 SYN with the wrong password", err, false)
			// The migration's last step: the MD5 key goes, AO stays.
			if err := e.delMD5(l, host(cli4)); err != nil {
				t.Fatal(err)
			}
			_, _, err = e.dial(cli4, l, e.md5To("a"))
			e.wantDial("MD5 SYN after the MD5 key left", err, false)
			_, _, err = e.dial(cli4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN after the MD5 key left", err, true)
		}},
		{"md5/ao-required-refused-beside-any-md5-key", func(t *testing.T, e env) {
			// ao_required drops every unsigned and MD5 segment, so the
			// kernel refuses it while the socket has an MD5 key for any
			// peer; with the key gone it is taken.
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.add(l, mk(host(oth4), 2, 1, "x"), tcpao.AddOptions{})
			e.wantErr("ao_required beside an MD5 key", l.SetInfo(tcpao.InfoChange{AORequired: bl(true)}), eKEYREJECTED)
			if e.info(l).AORequired {
				t.Fatal("ao_required set although refused")
			}
			if err := e.delMD5(l, host(cli4)); err != nil {
				t.Fatal(err)
			}
			e.wantErr("ao_required once the MD5 key left", l.SetInfo(tcpao.InfoChange{AORequired: bl(true)}), nil)
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, _, err := e.dial(cli4, l, nil)
			e.wantDial("unsigned SYN to an ao_required listener", err, false)
			_, _, err = e.dial(cli4, l, e.md5To("a"))
			e.wantDial("MD5 SYN to an ao_required listener", err, false)
		}},
		{"md5/established-md5-refuses-ao-and-needs-its-key", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			c, a, err := e.dial(cli4, l, e.md5To("a"))
			e.wantDial("MD5 connection", err, true)
			e.exchange(c, a, 2)
			// The first TCP-AO option on an established socket is refused
			// before any MD5 check (do_tcp_setsockopt): a connection
			// never changes kind in place.
			e.wantErr("AO add on the accepted MD5 socket", a.AddKey(mk(host(cli4), 1, 2, "x"), tcpao.AddOptions{}), eISCONN)
			e.wantErr("AO add on the connected MD5 client", c.AddKey(mk(host(lo4), 1, 2, "x"), tcpao.AddOptions{}), eISCONN)
			// Without its MD5 key the client sends unsigned segments, and
			// the accepted end, which still has one, drops them.
			if err := e.delMD5(c, host(lo4)); err != nil {
				t.Fatal(err)
			}
			if err := e.s.Exchange(c, a, 1); !errors.Is(err, ErrTimeout) {
				t.Fatalf("exchange after the client's MD5 key left: %v, want %v", err, ErrTimeout)
			}
		}},
		{"md5/client-md5-for-peer-drops-its-ao", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, a, err := e.dial(cli4, l, func(c tcpao.Socket) {
				e.add(c, mk(host(oth4), 1, 2, "x"), tcpao.AddOptions{})
				e.mustMD5(c, host(lo4), "a")
			})
			e.wantDial("client with AO for another peer and MD5 for this one", err, true)
			if _, err := a.Info(); !errors.Is(err, eNOENT) {
				t.Fatalf("accepted connection has TCP-AO: Info = %v", err)
			}
		}},
		{"md5/password-replaced-in-place", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.mustMD5(l, host(cli4), "b")
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, _, err := e.dial(cli4, l, e.md5To("a"))
			e.wantDial("old password", err, false)
			_, _, err = e.dial(cli4, l, e.md5To("b"))
			e.wantDial("new password", err, true)
		}},
		{"md5/ao-prefix-checked-at-its-network-address", func(t *testing.T, e env) {
			// A TCP-AO prefix key states its network address (host bits
			// are EINVAL) and is checked against the MD5 keys at that one
			// address (tcp_ao_add_cmd looks up only it), not at every
			// address its prefix covers: a /30 whose network address is
			// an MD5 peer's is refused, a /30 with two MD5 peers inside
			// is taken. Each of the two then connects with its own kind
			// (the AO one with the key's secret), never unsigned: on a
			// peering LAN where every host address is an MD5 member's,
			// one member moves to TCP-AO under a prefix whose network
			// address is no member's, the others untouched.
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.mustMD5(l, host(oth4), "b")
			e.mustMD5(l, p("127.0.0.4/32"), "c")
			e.wantErr("host bits in the stated address", l.AddKey(mk(p("127.0.0.2/30"), 2, 1, "x"), tcpao.AddOptions{}), eINVAL)
			e.wantErr("a /30 at MD5 peer .4", l.AddKey(mk(p("127.0.0.4/30"), 2, 1, "x"), tcpao.AddOptions{}), eKEYREJECTED)
			k := mk(p30, 2, 1, "x") // 127.0.0.0/30: .2 and .3 inside, each with MD5
			e.add(l, k, tcpao.AddOptions{})
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, a, err := e.dial(cli4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN from .2 under the /30", err, true)
			e.info(a)
			_, _, err = e.dial(oth4, l, e.md5To("b"))
			e.wantDial("MD5 SYN from .3, inside the /30", err, true)
			_, _, err = e.dial(oth4, l, nil)
			e.wantDial("unsigned SYN from .3", err, false)
			_, _, err = e.dial(cli4, l, nil)
			e.wantDial("unsigned SYN from .2", err, false)
			// The price while the prefix stands: a member inside it cannot
			// take a new MD5 password (the add, a replacement too, is
			// checked against the TCP-AO keys first); its old one stays.
			e.wantErr("a new MD5 password for .3 under the /30", e.addMD5(l, host(oth4), "b2"), eKEYREJECTED)
			_, _, err = e.dial(oth4, l, e.md5To("b"))
			e.wantDial("MD5 SYN from .3 with its old password", err, true)
		}},
		{"md5/dense-lan-members-share-a-prefix-with-ids-of-their-own", func(t *testing.T, e env) {
			// Two members at consecutive addresses, both on TCP-MD5,
			// migrating together: each one's TCP-AO key goes at the one
			// prefix around both (its network address no member's).
			// Overlapping keys are taken when their SendIDs and RecvIDs
			// differ, refused (EEXIST) when one is shared; each member
			// then connects with its own key, its password or neither
			// kind's never unsigned, and the accepted connection holds
			// every key over its address, the other member's too.
			l := e.socket(lo4)
			e.mustMD5(l, host(cli4), "a")
			e.mustMD5(l, host(oth4), "b")
			e.add(l, mk(p30, 2, 1, "x"), tcpao.AddOptions{}) // .2's
			e.add(l, mk(p30, 4, 3, "y"), tcpao.AddOptions{}) // .3's
			e.wantErr("a third key sharing .2's SendID", l.AddKey(mk(p30, 2, 9, "z"), tcpao.AddOptions{}), eEXIST)
			e.wantErr("a third key sharing .3's RecvID", l.AddKey(mk(p30, 9, 3, "z"), tcpao.AddOptions{}), eEXIST)
			e.wantErr("a host key inside, no member's, sharing .2's IDs", l.AddKey(mk(host(lo4), 2, 1, "z"), tcpao.AddOptions{}), eEXIST)
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			_, a, err := e.dial(cli4, l, e.aoTo("x", 1, 2))
			e.wantDial("AO SYN from .2 with its key", err, true)
			e.wantKeys("accepted from .2", e.keys(a, tcpao.KeyFilter{}),
				want{k: mk(p30, 2, 1, "x"), cur: true, rnext: true, name: "x"}, want{k: mk(p30, 4, 3, "y"), name: "y"})
			_, _, err = e.dial(oth4, l, e.aoTo("y", 3, 4))
			e.wantDial("AO SYN from .3 with its key", err, true)
			for _, c := range []struct {
				what  string
				from  netip.Addr
				prep  func(tcpao.Socket)
				taken bool
			}{
				{"MD5 SYN from .2", cli4, e.md5To("a"), true},
				{"MD5 SYN from .3", oth4, e.md5To("b"), true},
				{"unsigned SYN from .2", cli4, nil, false},
				{"unsigned SYN from .3", oth4, nil, false},
				{"AO SYN from .2 with a key ID no key has", cli4, e.aoTo("x", 7, 7), false},
			} {
				_, _, err := e.dial(c.from, l, c.prep)
				e.wantDial(c.what, err, c.taken)
			}
		}},
		{"md5/delete-exact-or-enoent", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.wantErr("delete without keys", e.delMD5(l, host(cli4)), eNOENT)
			e.mustMD5(l, p30, "a")
			e.wantErr("delete of another prefix", e.delMD5(l, host(cli4)), eNOENT)
			e.wantErr("delete of the key", e.delMD5(l, p30), nil)
			e.wantErr("delete again", e.delMD5(l, p30), eNOENT)
		}},
	}
}
