package conformance

import (
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// pair is a connected pair: client c (bound to cli4 or lo6), listener l,
// accepted socket a.
type pair struct{ c, l, a tcpao.Socket }

// rotationPair connects over v4 with two MKTs, "one" (client send 1 recv 11)
// and "two" (client send 2 recv 12), mirrored on the listener; the client
// starts on "one".
func rotationPair(e env) (pair, [2]tcpao.Key, [2]tcpao.Key) {
	e.t.Helper()
	cl := [2]tcpao.Key{mk(host(lo4), 1, 11, "one"), mk(host(lo4), 2, 12, "two")}
	sv := [2]tcpao.Key{mk(host(cli4), 11, 1, "one"), mk(host(cli4), 12, 2, "two")}
	l := e.listener(lo4, sv[0], sv[1])
	c := e.socket(cli4)
	e.add(c, cl[1], tcpao.AddOptions{})
	e.add(c, cl[0], tcpao.AddOptions{SetCurrent: true, SetRNext: true})
	return pair{c: c, l: l, a: e.connect(c, l)}, cl, sv
}

func connectCases() []Case {
	return []Case{
		{"connect/v4-keys-copied-from-listener", func(t *testing.T, e env) {
			sv, other, wide := mk(host(cli4), 2, 1, "s"), mk(host(oth4), 5, 6, "o"), mk(p("10.0.0.0/8"), 7, 8, "w")
			l := e.listener(lo4, sv, other, wide)
			c := e.socket(cli4)
			ck, stray := mk(host(lo4), 1, 2, "s"), mk(p("10.9.9.9/32"), 3, 4, "x")
			e.add(c, ck, tcpao.AddOptions{})
			e.add(c, stray, tcpao.AddOptions{})
			a := e.connect(c, l)
			// Only the listener key that matches the peer is copied; the
			// client drops its keys for other peers at connect().
			e.wantKeys("accepted", e.keys(a, tcpao.KeyFilter{}), want{k: sv, cur: true, rnext: true, name: "s"})
			e.wantKeys("client", e.keys(c, tcpao.KeyFilter{}), want{k: ck, cur: true, rnext: true, name: "s"})
			if in := e.info(c); in.CurrentKey != 1 || in.RNextKey != 2 || in.PktGood == 0 {
				t.Fatalf("client Info = %+v, want current 1, rnext 2, a verified SYN-ACK", in)
			}
			if in := e.info(l); in.PktGood == 0 || in.PktBad != 0 {
				t.Fatalf("listener Info = %+v, want the SYN verified", in)
			}
			e.exchange(c, a, 3)
			for _, s := range []tcpao.Socket{c, a} {
				if in := e.info(s); in.PktGood == 0 || in.PktBad != 0 || in.PktKeyNotFound != 0 {
					t.Fatalf("Info after exchange = %+v", in)
				}
			}
			if g, _ := e.keyCounters(a, 2, 1); g == 0 {
				t.Fatal("accepted key pkt_good = 0 after the exchange")
			}
		}},
		{"connect/v6", func(t *testing.T, e env) {
			sv := mk(host(lo6), 4, 3, "v6")
			sv.Algorithm = tcpao.HMACSHA256
			l := e.listener(lo6, sv, mk(p("2001:db8::/32"), 4, 3, "other"))
			c := e.socket(lo6)
			ck := mk(host(lo6), 3, 4, "v6")
			ck.Algorithm = tcpao.HMACSHA256
			e.add(c, ck, tcpao.AddOptions{})
			a := e.connect(c, l)
			e.wantKeys("accepted", e.keys(a, tcpao.KeyFilter{}), want{k: sv, cur: true, rnext: true, name: "v6"})
			e.exchange(c, a, 2)
			if in := e.info(a); in.PktGood == 0 || in.PktBad != 0 {
				t.Fatalf("accepted Info = %+v", in)
			}
		}},
		{"connect/cmac-aes128", func(t *testing.T, e env) {
			sv, ck := mk(host(cli4), 9, 8, "c"), mk(host(lo4), 8, 9, "c")
			sec := tcpao.NewSecret([]byte("0123456789abcdef"))
			for _, k := range []*tcpao.Key{&sv, &ck} {
				k.Algorithm, k.Secret = tcpao.CMACAES128, sec
			}
			l := e.listener(lo4, sv)
			c := e.socket(cli4)
			e.add(c, ck, tcpao.AddOptions{})
			a := e.connect(c, l)
			e.exchange(c, a, 1)
			ks := e.keys(a, tcpao.KeyFilter{})
			if len(ks) != 1 || ks[0].Algorithm != tcpao.CMACAES128 || ks[0].Fingerprint != sec.Fingerprint() {
				t.Fatalf("accepted keys = %+v", ks)
			}
		}},
		{"connect/get-keys-skip-fingerprint", func(t *testing.T, e env) {
			// SkipFingerprint: the same keys, IDs, flags and counters,
			// with no fingerprint.
			p, _, _ := rotationPair(e)
			e.exchange(p.c, p.a, 2)
			full := e.keys(p.a, tcpao.KeyFilter{})
			bare := e.keys(p.a, tcpao.KeyFilter{SkipFingerprint: true})
			if len(full) != 2 || len(bare) != len(full) {
				t.Fatalf("keys = %+v, without fingerprints %+v; want the two on both", full, bare)
			}
			for i := range full {
				if full[i].Fingerprint == (tcpao.Fingerprint{}) || bare[i].Fingerprint != (tcpao.Fingerprint{}) {
					t.Fatalf("key %d: fingerprint %x, skipped %x; want one, then none", i, full[i].Fingerprint[:4], bare[i].Fingerprint[:4])
				}
				full[i].Fingerprint = tcpao.Fingerprint{}
				if full[i] != bare[i] {
					t.Fatalf("key %d: %+v, without its fingerprint %+v; want the same", i, full[i], bare[i])
				}
			}
		}},
		{"connect/defaults-to-newest-matching-key", func(t *testing.T, e env) {
			cl := []tcpao.Key{mk(host(lo4), 1, 1, "one"), mk(host(lo4), 2, 2, "two")}
			sv := []tcpao.Key{mk(host(cli4), 1, 1, "one"), mk(host(cli4), 2, 2, "two")}
			l := e.listener(lo4, sv...)
			c := e.socket(cli4)
			e.add(c, cl[0], tcpao.AddOptions{})
			e.add(c, cl[1], tcpao.AddOptions{})
			a := e.connect(c, l)
			e.wantKeys("client", e.keys(c, tcpao.KeyFilter{}),
				want{k: cl[1], cur: true, rnext: true, name: "two"}, want{k: cl[0], name: "one"})
			// The accepted socket's copies are in reverse order; Current
			// follows the client's RNextKeyID, RNext its KeyID.
			e.wantKeys("accepted", e.keys(a, tcpao.KeyFilter{}),
				want{k: sv[0], name: "one"}, want{k: sv[1], cur: true, rnext: true, name: "two"})
		}},
		{"connect/rotation-through-rnext", func(t *testing.T, e env) {
			pr, _, _ := rotationPair(e)
			e.exchange(pr.c, pr.a, 2)
			if in := e.info(pr.a); in.CurrentKey != 11 || in.RNextKey != 1 {
				t.Fatalf("accepted Info = %+v, want current 11 rnext 1", in)
			}
			// The client asks for key "two"; the server's Current follows.
			e.wantErr("client rnext two", pr.c.SetInfo(tcpao.InfoChange{RNext: u8(12)}), nil)
			e.exchange(pr.c, pr.a, 2)
			if in := e.info(pr.a); in.CurrentKey != 12 {
				t.Fatalf("accepted Info = %+v, want Current 12 after the client's RNext", in)
			}
			oneGood, _ := e.keyCounters(pr.c, 1, 11)
			twoGood, _ := e.keyCounters(pr.c, 2, 12)
			if twoGood == 0 {
				t.Fatal("client's key two verified nothing after the switch")
			}
			e.exchange(pr.c, pr.a, 2)
			if g, _ := e.keyCounters(pr.c, 1, 11); g != oneGood {
				t.Fatalf("client key one pkt_good %d -> %d after the server switched away", oneGood, g)
			}
			if g, _ := e.keyCounters(pr.c, 2, 12); g <= twoGood {
				t.Fatalf("client key two pkt_good %d -> %d, want growth", twoGood, g)
			}
			// The server asks for "two" as well; the client's Current follows.
			e.wantErr("server rnext two", pr.a.SetInfo(tcpao.InfoChange{RNext: u8(2)}), nil)
			e.exchange(pr.c, pr.a, 2)
			if in := e.info(pr.c); in.CurrentKey != 2 || in.RNextKey != 12 {
				t.Fatalf("client Info = %+v, want current 2 rnext 12", in)
			}
			// Key "one" is idle on both ends and can go.
			e.wantErr("client delete one", pr.c.DelKey(ref(mk(host(lo4), 1, 11, "one"))), nil)
			e.wantErr("server delete one", pr.a.DelKey(ref(mk(host(cli4), 11, 1, "one"))), nil)
			e.exchange(pr.c, pr.a, 1)
			if in := e.info(pr.c); in.PktBad != 0 || in.PktKeyNotFound != 0 {
				t.Fatalf("client Info = %+v", in)
			}
		}},
		{"connect/delete-current-ebusy-then-forced", func(t *testing.T, e env) {
			pr, cl, _ := rotationPair(e)
			e.wantErr("delete Current_key", pr.c.DelKey(ref(cl[0])), eBUSY)
			d := ref(cl[0])
			d.SetCurrent, d.Current, d.SetRNext, d.RNext = true, 2, true, 12
			e.wantErr("forced delete", pr.c.DelKey(d), nil)
			e.wantKeys("client", e.keys(pr.c, tcpao.KeyFilter{}), want{k: cl[1], cur: true, rnext: true, name: "two"})
			e.exchange(pr.c, pr.a, 2)
			if in := e.info(pr.a); in.CurrentKey != 12 || in.PktBad != 0 {
				t.Fatalf("accepted Info = %+v, want Current 12", in)
			}
		}},
		{"connect/established-rules", func(t *testing.T, e env) {
			pr, cl, _ := rotationPair(e)
			d := ref(cl[1])
			d.Async = true
			e.wantErr("del_async on established", pr.c.DelKey(d), eINVAL)
			e.wantErr("key for another peer", pr.c.AddKey(mk(p("10.0.0.0/8"), 5, 15, "x"), tcpao.AddOptions{}), eINVAL)
			e.wantErr("duplicate id", pr.c.AddKey(mk(host(lo4), 2, 16, "x"), tcpao.AddOptions{}), eEXIST)
			e.wantErr("new key for the peer", pr.c.AddKey(mk(host(lo4), 5, 15, "x"), tcpao.AddOptions{}), nil)
			e.wantErr("unknown Current", pr.c.SetInfo(tcpao.InfoChange{Current: u8(99)}), eNOENT)
		}},
		{"connect/wrong-secret-refused", func(t *testing.T, e env) {
			l := e.listener(lo4, mk(host(cli4), 2, 1, "server"))
			c := e.socket(cli4)
			e.add(c, mk(host(lo4), 1, 2, "client"), tcpao.AddOptions{})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
			if in := e.info(l); in.PktBad == 0 || in.PktGood != 0 {
				t.Fatalf("listener Info = %+v, want bad SYNs only", in)
			}
			if _, bad := e.keyCounters(l, 2, 1); bad == 0 {
				t.Fatal("listener key pkt_bad = 0")
			}
		}},
		{"connect/key-not-found-refused", func(t *testing.T, e env) {
			l := e.listener(lo4, mk(host(cli4), 2, 1, "s"))
			c := e.socket(cli4)
			e.add(c, mk(host(lo4), 9, 2, "s"), tcpao.AddOptions{})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
			if in := e.info(l); in.PktKeyNotFound == 0 || in.PktGood != 0 {
				t.Fatalf("listener Info = %+v, want key_not_found", in)
			}
		}},
		{"connect/no-key-for-client-rnext-refused", func(t *testing.T, e env) {
			// The SYN verifies, but the listener has no key whose SendID is
			// the client's RNextKeyID, so no SYN-ACK is sent.
			l := e.listener(lo4, mk(host(cli4), 2, 1, "s"))
			c := e.socket(cli4)
			e.add(c, mk(host(lo4), 1, 2, "s"), tcpao.AddOptions{SetCurrent: true})
			e.add(c, mk(host(lo4), 3, 4, "t"), tcpao.AddOptions{SetRNext: true})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
			if in := e.info(l); in.PktGood == 0 {
				t.Fatalf("listener Info = %+v, want the SYN verified", in)
			}
		}},
		{"connect/unsigned-to-ao-listener-refused", func(t *testing.T, e env) {
			l := e.listener(lo4, mk(host(cli4), 2, 1, "s"))
			c := e.socket(cli4)
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
			if in := e.info(l); in.PktAORequired == 0 {
				t.Fatalf("listener Info = %+v, want ao_required", in)
			}
		}},
		{"connect/signed-to-plain-listener-refused", func(t *testing.T, e env) {
			l := e.listener(lo4)
			c := e.socket(cli4)
			e.add(c, mk(host(lo4), 1, 2, "s"), tcpao.AddOptions{})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, ErrTimeout)
		}},
		{"connect/no-client-key-for-peer-ekeyrejected", func(t *testing.T, e env) {
			l := e.listener(lo4)
			c := e.socket(cli4)
			e.add(c, mk(p("10.0.0.0/8"), 1, 2, "s"), tcpao.AddOptions{})
			_, err := e.s.Connect(c, l)
			e.wantErr("connect", err, eKEYREJECTED)
		}},
		{"connect/unsigned-peer-of-ao-listener-eisconn", func(t *testing.T, e env) {
			// The listener has keys, but none for this client: it connects
			// without TCP-AO and the accepted socket cannot gain any.
			l := e.listener(lo4, mk(host(oth4), 2, 1, "o"))
			c := e.socket(cli4)
			a := e.connect(c, l)
			e.exchange(c, a, 1)
			_, err := a.Info()
			e.wantErr("accepted Info", err, eNOENT)
			_, err = a.Keys(tcpao.KeyFilter{})
			e.wantErr("accepted Keys", err, eNOENT)
			e.wantErr("AddKey", a.AddKey(mk(host(cli4), 2, 1, "s"), tcpao.AddOptions{}), eISCONN)
			e.wantErr("DelKey", a.DelKey(ref(mk(host(cli4), 2, 1, "s"))), eISCONN)
			e.wantErr("SetInfo", a.SetInfo(tcpao.InfoChange{AORequired: bl(true)}), eISCONN)
			e.wantErr("client AddKey", c.AddKey(mk(host(lo4), 1, 2, "s"), tcpao.AddOptions{}), eISCONN)
		}},
		{"connect/key-not-found-on-established", func(t *testing.T, e env) {
			pr, _, _ := rotationPair(e)
			e.add(pr.c, mk(host(lo4), 3, 13, "three"), tcpao.AddOptions{})
			e.wantErr("client current three", pr.c.SetInfo(tcpao.InfoChange{Current: u8(3)}), nil)
			e.wantErr("exchange", e.s.Exchange(pr.c, pr.a, 1), ErrTimeout)
			if in := e.info(pr.a); in.PktKeyNotFound == 0 {
				t.Fatalf("accepted Info = %+v, want key_not_found", in)
			}
		}},
		{"connect/wrong-secret-on-established", func(t *testing.T, e env) {
			pr, _, _ := rotationPair(e)
			e.add(pr.c, mk(host(lo4), 3, 13, "three"), tcpao.AddOptions{})
			e.add(pr.a, mk(host(cli4), 13, 3, "not-three"), tcpao.AddOptions{})
			e.wantErr("client current three", pr.c.SetInfo(tcpao.InfoChange{Current: u8(3)}), nil)
			e.wantErr("exchange", e.s.Exchange(pr.c, pr.a, 1), ErrTimeout)
			if in := e.info(pr.a); in.PktBad == 0 {
				t.Fatalf("accepted Info = %+v, want pkt_bad", in)
			}
			if _, bad := e.keyCounters(pr.a, 13, 3); bad == 0 {
				t.Fatal("accepted key three pkt_bad = 0")
			}
		}},
	}
}
