package conformance

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// mappedPair connects a client on ::ffff:127.0.0.2 to a listener on
// ::ffff:127.0.0.1 (IPv6 sockets, IPv4 packets) with one IPv4 key each.
func mappedPair(e env) pair {
	e.t.Helper()
	l := e.listener(netip.AddrFrom16(lo4.As16()), mk(host(cli4), 2, 1, "s"))
	c := e.socket(netip.AddrFrom16(cli4.As16()))
	e.add(c, mk(host(lo4), 1, 2, "s"), tcpao.AddOptions{})
	return pair{c: c, l: l, a: e.connect(c, l)}
}

// regressCases are divergences the differential test (differential.go)
// found between the in-memory kernel and the real one, one case each.
func regressCases() []Case {
	// refused is a closed socket whose connect(2) failed with EKEYREJECTED:
	// the kernel keeps the destination address (tcp_v4_connect's failure
	// path resets only the port), so later keys must match that peer.
	refused := func(e env) tcpao.Socket {
		e.t.Helper()
		l := e.listener(lo4)
		c := e.socket(cli4)
		e.add(c, mk(p("10.0.0.0/8"), 1, 2, "s"), tcpao.AddOptions{})
		_, err := e.s.Connect(c, l)
		e.wantErr("connect", err, eKEYREJECTED)
		return c
	}
	// xopt returns k with the exclude-options flag set.
	xopt := func(k tcpao.Key) tcpao.Key { k.ExcludeOptions = true; return k }
	return []Case{
		{"connect/exclude-options-mismatch-syn-dropped", func(t *testing.T, e env) {
			// A SYN carries MSS, window scale, SACK-permitted and
			// timestamps: a key that excludes them hashes other bytes
			// than one that covers them.
			l := e.listener(lo4, xopt(mk(host(cli4), 2, 1, "s")))
			c := e.socket(cli4)
			e.add(c, mk(host(lo4), 1, 2, "s"), tcpao.AddOptions{})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
			if in := e.info(l); in.PktBad == 0 {
				t.Fatalf("listener Info = %+v, want the SYN counted bad", in)
			}
		}},
		{"connect/exclude-options-mismatch-verifies-when-only-ao", func(t *testing.T, e env) {
			// Once established, a TCP-AO connection's segments carry no
			// other option (the SYN-ACK turns timestamps off when SACK is
			// on), so with a MAC length that needs no padding the
			// exclude-options flag changes nothing that is hashed: the
			// sender excludes, the receiver does not, and the MAC matches.
			pr, _, _ := rotationPair(e)
			e.add(pr.c, xopt(mk(host(lo4), 3, 13, "three")), tcpao.AddOptions{SetCurrent: true})
			e.add(pr.a, mk(host(cli4), 13, 3, "three"), tcpao.AddOptions{})
			e.exchange(pr.c, pr.a, 1)
			if g, b := e.keyCounters(pr.a, 13, 3); g == 0 || b != 0 {
				t.Fatalf("server key three pkt_good=%d pkt_bad=%d, want the excluding client's segments verified", g, b)
			}
		}},
		{"connect/v4-mapped-v6-key-against-v4-key-dropped", func(t *testing.T, e env) {
			// On a v4-mapped connection a key for :: /0 is an AF_INET6
			// key: its traffic keys come from the IPv6 KDF over the
			// mapped addresses, the peer's IPv4 key's from the IPv4 KDF.
			pr := mappedPair(e)
			e.add(pr.c, mk(p("::/0"), 3, 13, "t"), tcpao.AddOptions{SetCurrent: true})
			e.add(pr.a, mk(host(cli4), 13, 3, "t"), tcpao.AddOptions{})
			e.wantErr("exchange", e.s.Exchange(pr.c, pr.a, 1), ErrTimeout)
			if _, b := e.keyCounters(pr.a, 13, 3); b == 0 {
				t.Fatal("server IPv4 key pkt_bad = 0, want the client's IPv6-key segment counted bad")
			}
		}},
		{"connect/v4-mapped-v6-keys-on-both-ends-verify", func(t *testing.T, e env) {
			pr := mappedPair(e)
			e.add(pr.c, mk(p("::/0"), 3, 13, "t"), tcpao.AddOptions{SetCurrent: true})
			e.add(pr.a, mk(p("::/0"), 13, 3, "t"), tcpao.AddOptions{})
			e.exchange(pr.c, pr.a, 1)
			if g, b := e.keyCounters(pr.a, 13, 3); g == 0 || b != 0 {
				t.Fatalf("server IPv6 key pkt_good=%d pkt_bad=%d, want the client's segments verified", g, b)
			}
		}},
		{"connect/exclude-options-mismatch-padded-mac-dropped", func(t *testing.T, e env) {
			// A 13-byte MAC is followed by three NOPs: a key that covers
			// options hashes them, one that excludes options does not.
			pr, _, _ := rotationPair(e)
			ck, sk := xopt(mk(host(lo4), 3, 13, "three")), mk(host(cli4), 13, 3, "three")
			ck.MACLen, sk.MACLen = 13, 13
			e.add(pr.c, ck, tcpao.AddOptions{SetCurrent: true})
			e.add(pr.a, sk, tcpao.AddOptions{})
			e.wantErr("exchange", e.s.Exchange(pr.c, pr.a, 1), ErrTimeout)
			if _, b := e.keyCounters(pr.a, 13, 3); b == 0 {
				t.Fatal("server key three pkt_bad = 0, want the padded segment counted bad")
			}
		}},
		{"closed/after-ekeyrejected-add-other-peer-einval", func(t *testing.T, e env) {
			c := refused(e)
			e.wantErr("key for another peer", c.AddKey(mk(host(oth4), 3, 4, "x"), tcpao.AddOptions{}), eINVAL)
			k := mk(host(lo4), 3, 4, "x")
			e.wantErr("key for the refused peer", c.AddKey(k, tcpao.AddOptions{}), nil)
			e.wantErr("any address", c.AddKey(mk(p("0.0.0.0/0"), 5, 6, "y"), tcpao.AddOptions{}), nil)
		}},
		{"closed/after-ekeyrejected-oversized-add-einval", func(t *testing.T, e env) {
			c := refused(e)
			k := mk(host(oth4), 3, 4, "x")
			k.MACLen = 17
			e.wantErr("maclen 17 for another peer", c.AddKey(k, tcpao.AddOptions{}), eINVAL)
			k.Peer = host(lo4)
			e.wantErr("maclen 17 for the refused peer", c.AddKey(k, tcpao.AddOptions{}), eMSGSIZE)
		}},
		{"closed/after-ekeyrejected-duplicate-add-einval", func(t *testing.T, e env) {
			c := refused(e)
			// The key for 10/8 survives the refused connect; a key inside it
			// overlaps, but the address check comes first.
			e.wantErr("same ids inside the 10/8 key", c.AddKey(mk(p("10.1.0.0/16"), 1, 2, "s"), tcpao.AddOptions{}), eINVAL)
			e.add(c, mk(host(lo4), 3, 4, "x"), tcpao.AddOptions{})
			e.wantErr("same SendID for the refused peer", c.AddKey(mk(host(lo4), 3, 9, "x"), tcpao.AddOptions{}), eEXIST)
		}},
		{"connect/exchange-final-ack-uses-switched-key", func(t *testing.T, e env) {
			// The server asks for key "two" in its answer; the client
			// switches Current_key and acknowledges the answer with it, so
			// the server's key "two" verifies a segment in the same exchange.
			pr, _, _ := rotationPair(e)
			e.wantErr("server rnext two", pr.a.SetInfo(tcpao.InfoChange{RNext: u8(2)}), nil)
			e.exchange(pr.c, pr.a, 1)
			if in := e.info(pr.c); in.CurrentKey != 2 {
				t.Fatalf("client Info = %+v, want Current 2", in)
			}
			if g, _ := e.keyCounters(pr.a, 12, 2); g == 0 {
				t.Fatal("server key two pkt_good = 0: the client's ACK was not signed with it")
			}
		}},
	}
}
