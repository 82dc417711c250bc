package conformance

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// linkLocalCases pin how TCP-AO keys match IPv6 link-local peers (BGP
// unnumbered: neighbours known only by the link-local address they peer
// from): a key's address has no zone, so it matches the address on every
// link; a key cannot be tied to a plain interface (only to a VRF); and so
// one listener cannot tell apart two links' neighbours that share a
// link-local address.
func linkLocalCases() []Case {
	links := func(e env) [2]Link {
		e.t.Helper()
		ls, err := e.s.Links()
		if err != nil {
			e.t.Fatalf("links: %v", err)
		}
		return ls
	}
	// verified fails the case unless the accepted socket's key (send,
	// recv) verified the client's segments and none failed.
	verified := func(e env, a tcpao.Socket, send, recv uint8, what string) {
		e.t.Helper()
		if g, b := e.keyCounters(a, send, recv); g == 0 || b != 0 {
			e.t.Fatalf("%s: key send=%d recv=%d pkt_good=%d pkt_bad=%d, want the client's segments verified", what, send, recv, g, b)
		}
	}
	return []Case{
		{"linklocal/host-keys-verify", func(t *testing.T, e env) {
			l0 := links(e)[0].Name
			sk := mk(host(LinkLocalA), 2, 1, "s")
			l := e.listener(LinkLocalB.WithZone(l0), sk)
			c := e.socket(LinkLocalA.WithZone(l0))
			e.add(c, mk(host(LinkLocalB), 1, 2, "s"), tcpao.AddOptions{})
			a := e.connect(c, l)
			e.exchange(c, a, 1)
			// The accepted socket's copy names the peer without its zone.
			e.wantKeys("accepted", e.keys(a, tcpao.KeyFilter{}), want{k: sk, cur: true, rnext: true, name: "s"})
			verified(e, a, 2, 1, "fe80::a/128 on the listener")
		}},
		{"linklocal/fe80-prefix-key-verifies", func(t *testing.T, e env) {
			l0 := links(e)[0].Name
			l := e.listener(LinkLocalB.WithZone(l0), mk(p("fe80::/64"), 2, 1, "s"))
			c := e.socket(LinkLocalA.WithZone(l0))
			e.add(c, mk(p("fe80::/64"), 1, 2, "s"), tcpao.AddOptions{})
			a := e.connect(c, l)
			e.exchange(c, a, 1)
			verified(e, a, 2, 1, "fe80::/64 on the listener")
		}},
		{"linklocal/link-cannot-be-named-einval", func(t *testing.T, e env) {
			ls := links(e)
			s := e.socket(LinkLocalB.WithZone(ls[0].Name))
			k := mk(host(LinkLocalA), 1, 2, "a")
			k.IfIndex = ls[0].Index // a plain interface, not an L3 master
			e.wantErr("ifindex of the peer's link", s.AddKey(k, tcpao.AddOptions{}), eINVAL)
		}},
		{"linklocal/one-key-serves-every-link", func(t *testing.T, e env) {
			// A wildcard listener (a BGP speaker's) with one key for
			// fe80::a: the neighbours at fe80::a on both links connect
			// with it; one at fe80::a with another secret is refused on
			// either link. Nothing in a key tells the links apart.
			ls := links(e)
			l := e.listener(netip.IPv6Unspecified(), mk(host(LinkLocalA), 2, 1, "s"))
			for i, ln := range ls {
				c := e.socket(LinkLocalA.WithZone(ln.Name))
				e.add(c, mk(host(LinkLocalB), 1, 2, "s"), tcpao.AddOptions{})
				a, err := e.s.ConnectTo(c, l, LinkLocalB.WithZone(ln.Name))
				if err != nil {
					t.Fatalf("link %d (%s): connect: %v", i, ln.Name, err)
				}
				e.exchange(c, a, 1)
				verified(e, a, 2, 1, "link "+ln.Name)
				o := e.socket(LinkLocalA.WithZone(ln.Name))
				e.add(o, mk(host(LinkLocalB), 1, 2, "other"), tcpao.AddOptions{})
				if _, err := e.s.ConnectTo(o, l, LinkLocalB.WithZone(ln.Name)); !errors.Is(err, ErrTimeout) {
					t.Fatalf("link %s: a neighbour with another secret: connect error %v, want its SYN dropped (%v)", ln.Name, err, ErrTimeout)
				}
			}
		}},
	}
}
