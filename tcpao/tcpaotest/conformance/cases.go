package conformance

import (
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Case is one row of the table.
type Case struct {
	Name string
	Run  func(t *testing.T, e env)
}

// Run runs every case against a fresh Stack from newStack.
func Run(t *testing.T, newStack func(t *testing.T) Stack) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			s := newStack(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close stack: %v", err)
				}
			})
			c.Run(t, env{t: t, s: s})
		})
	}
}

var p = netip.MustParsePrefix

// Cases is the conformance table.
func Cases() []Case {
	return append(append(append(append(append(append(keyCases(), connectCases()...), infoCases()...), regressCases()...), md5Cases()...), linkLocalCases()...), probeCases()...)
}

func keyCases() []Case {
	return []Case{
		{"closed/no-ao-state-enoent", func(t *testing.T, e env) {
			s := e.socket(lo4)
			_, err := s.Info()
			e.wantErr("Info", err, eNOENT)
			_, err = s.Keys(tcpao.KeyFilter{})
			e.wantErr("Keys", err, eNOENT)
			e.wantErr("DelKey", s.DelKey(ref(mk(host(lo4), 1, 2, "a"))), eNOENT)
		}},
		{"closed/add-v4-newest-first", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k1, k2 := mk(host(lo4), 1, 2, "a"), mk(p("10.0.0.0/8"), 3, 4, "b")
			k2.Algorithm, k2.MACLen = tcpao.HMACSHA256, 16
			e.add(s, k1, tcpao.AddOptions{})
			e.add(s, k2, tcpao.AddOptions{})
			e.wantKeys("all", e.keys(s, tcpao.KeyFilter{}), want{k: k2, name: "b"}, want{k: k1, name: "a"})
			if in := e.info(s); in.HaveCurrent || in.HaveRNext {
				t.Fatalf("closed socket without set_current has Current/RNext: %+v", in)
			}
		}},
		{"closed/duplicate-sendid-eexist", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.add(s, mk(host(lo4), 1, 2, "a"), tcpao.AddOptions{})
			e.wantErr("same SendID", s.AddKey(mk(host(lo4), 1, 5, "b"), tcpao.AddOptions{}), eEXIST)
		}},
		{"closed/duplicate-recvid-eexist", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.add(s, mk(host(lo4), 1, 2, "a"), tcpao.AddOptions{})
			e.wantErr("same RecvID", s.AddKey(mk(host(lo4), 7, 2, "b"), tcpao.AddOptions{}), eEXIST)
		}},
		{"closed/overlapping-prefix-eexist", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.add(s, mk(p("127.0.0.0/8"), 1, 2, "a"), tcpao.AddOptions{})
			e.wantErr("host inside the /8", s.AddKey(mk(host(lo4), 1, 9, "b"), tcpao.AddOptions{}), eEXIST)
		}},
		{"closed/any-address-overlaps-all-eexist", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.add(s, mk(p("0.0.0.0/0"), 1, 2, "a"), tcpao.AddOptions{})
			e.wantErr("host under 0/0", s.AddKey(mk(p("10.0.0.1/32"), 3, 2, "b"), tcpao.AddOptions{}), eEXIST)
		}},
		{"closed/disjoint-prefixes-share-ids", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k1, k2 := mk(p("10.0.0.0/8"), 1, 2, "a"), mk(p("192.168.0.0/16"), 1, 2, "b")
			e.add(s, k1, tcpao.AddOptions{})
			e.add(s, k2, tcpao.AddOptions{})
			r := k2.KeyRef
			e.wantKeys("by ref", e.keys(s, tcpao.KeyFilter{Ref: &r}), want{k: k2, name: "b"})
		}},
		{"closed/bad-prefix-einval", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.wantErr("host bits", s.AddKey(mk(p("10.0.0.1/8"), 1, 2, "a"), tcpao.AddOptions{}), eINVAL)
			e.wantErr("address with /0", s.AddKey(mk(p("10.0.0.0/0"), 1, 2, "a"), tcpao.AddOptions{}), eINVAL)
		}},
		{"closed/maclen-emsgsize", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k := mk(host(lo4), 1, 2, "a")
			k.MACLen = 17
			e.wantErr("maclen 17", s.AddKey(k, tcpao.AddOptions{}), eMSGSIZE)
			k.MACLen = 16
			e.add(s, k, tcpao.AddOptions{})
			e.wantKeys("maclen 16", e.keys(s, tcpao.KeyFilter{}), want{k: k, name: "a"})
		}},
		{"closed/ifindex-not-vrf-einval", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k := mk(host(lo4), 1, 2, "a")
			k.IfIndex = 1 // lo is not an L3 master device
			e.wantErr("ifindex of lo", s.AddKey(k, tcpao.AddOptions{}), eINVAL)
		}},
		{"closed/delete-exact-match-only", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k := mk(p("10.0.0.0/8"), 1, 2, "a")
			e.add(s, k, tcpao.AddOptions{})
			d := ref(k)
			d.Peer = p("10.0.0.0/16")
			e.wantErr("other prefix", s.DelKey(d), eNOENT)
			d = ref(k)
			d.RecvID = 3
			e.wantErr("other RecvID", s.DelKey(d), eNOENT)
			e.wantErr("exact", s.DelKey(ref(k)), nil)
			e.wantKeys("after delete", e.keys(s, tcpao.KeyFilter{}))
			e.info(s) // the TCP-AO state outlives its last key
		}},
		{"closed/del-async-einval", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k := mk(host(lo4), 1, 2, "a")
			e.add(s, k, tcpao.AddOptions{})
			d := ref(k)
			d.Async = true
			e.wantErr("del_async on closed", s.DelKey(d), eINVAL)
		}},
		{"closed/set-current-then-delete-ebusy-forced", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k1, k2 := mk(host(lo4), 1, 1, "a"), mk(host(lo4), 2, 2, "b")
			e.add(s, k1, tcpao.AddOptions{SetCurrent: true, SetRNext: true})
			e.add(s, k2, tcpao.AddOptions{})
			if in := e.info(s); !in.HaveCurrent || in.CurrentKey != 1 || !in.HaveRNext || in.RNextKey != 1 {
				t.Fatalf("Info = %+v, want current 1 rnext 1", in)
			}
			e.wantErr("delete Current_key", s.DelKey(ref(k1)), eBUSY)
			// The refused key is linked again at the head of the list.
			e.wantKeys("after EBUSY", e.keys(s, tcpao.KeyFilter{}),
				want{k: k1, cur: true, rnext: true, name: "a"}, want{k: k2, name: "b"})
			d := ref(k1)
			d.SetCurrent, d.Current, d.SetRNext, d.RNext = true, 2, true, 2
			e.wantErr("forced delete", s.DelKey(d), nil)
			e.wantKeys("after forced delete", e.keys(s, tcpao.KeyFilter{}), want{k: k2, cur: true, rnext: true, name: "b"})
		}},
		{"closed/delete-with-unknown-replacement-enoent", func(t *testing.T, e env) {
			s := e.socket(lo4)
			k := mk(host(lo4), 1, 1, "a")
			e.add(s, k, tcpao.AddOptions{SetCurrent: true})
			d := ref(k)
			d.SetCurrent, d.Current = true, 9
			e.wantErr("replacement 9", s.DelKey(d), eNOENT)
		}},
		{"listen/keys-before-and-after-listen", func(t *testing.T, e env) {
			k1, k2 := mk(host(cli4), 1, 2, "a"), mk(host(oth4), 3, 4, "b")
			l := e.listener(lo4, k1)
			e.add(l, k2, tcpao.AddOptions{})
			e.wantKeys("all", e.keys(l, tcpao.KeyFilter{}), want{k: k2, name: "b"}, want{k: k1, name: "a"})
			if in := e.info(l); in.HaveCurrent || in.HaveRNext {
				t.Fatalf("listener has Current/RNext: %+v", in)
			}
		}},
		{"listen/set-current-einval", func(t *testing.T, e env) {
			k := mk(host(cli4), 1, 2, "a")
			l := e.listener(lo4, k)
			e.wantErr("AddKey set_current", l.AddKey(mk(host(oth4), 3, 4, "b"), tcpao.AddOptions{SetCurrent: true}), eINVAL)
			e.wantErr("AddKey set_rnext", l.AddKey(mk(host(oth4), 3, 4, "b"), tcpao.AddOptions{SetRNext: true}), eINVAL)
			e.wantErr("SetInfo current", l.SetInfo(tcpao.InfoChange{Current: u8(1)}), eINVAL)
			d := ref(k)
			d.SetRNext, d.RNext = true, 2
			e.wantErr("DelKey set_rnext", l.DelKey(d), eINVAL)
		}},
		{"listen/del-async", func(t *testing.T, e env) {
			k1, k2 := mk(host(cli4), 1, 2, "a"), mk(host(oth4), 1, 2, "b")
			l := e.listener(lo4, k1, k2)
			d := ref(k1)
			d.Async = true
			e.wantErr("del_async", l.DelKey(d), nil)
			e.wantKeys("after", e.keys(l, tcpao.KeyFilter{}), want{k: k2, name: "b"})
		}},
		{"listen/current-set-before-listen", func(t *testing.T, e env) {
			// Current_key/RNext_key set in TCP_CLOSE survive listen(). A
			// synchronous delete of that key is refused; del_async
			// deletes it and clears both (kernels without that fix left
			// the pointers dangling: tcpao.DeleteKey never takes this
			// path for a key in use, see tcpaotest.BugAsyncDelInUse).
			s := e.socket(lo4)
			k1, k2 := mk(host(cli4), 1, 1, "a"), mk(host(oth4), 2, 2, "b")
			e.add(s, k1, tcpao.AddOptions{SetCurrent: true, SetRNext: true})
			e.add(s, k2, tcpao.AddOptions{})
			if err := e.s.Listen(s); err != nil {
				t.Fatalf("listen: %v", err)
			}
			if in := e.info(s); !in.HaveCurrent || in.CurrentKey != 1 || !in.HaveRNext || in.RNextKey != 1 {
				t.Fatalf("listener Info = %+v, want current 1 rnext 1 kept from TCP_CLOSE", in)
			}
			e.wantErr("sync delete of the listener's Current_key", s.DelKey(ref(k1)), eBUSY)
			d := ref(k1)
			d.Async = true
			e.wantErr("del_async of the listener's Current_key", s.DelKey(d), nil)
			if in := e.info(s); in.HaveCurrent || in.HaveRNext {
				t.Fatalf("listener Info after del_async = %+v, want no Current/RNext", in)
			}
			e.wantKeys("after", e.keys(s, tcpao.KeyFilter{}), want{k: k2, name: "b"})
		}},
		{"listen/ipv6-and-v4-mapped", func(t *testing.T, e env) {
			k1, k2, k3 := mk(host(lo6), 1, 2, "a"), mk(p("2001:db8::/32"), 3, 4, "b"), mk(host(cli4), 5, 6, "c")
			l := e.listener(lo6, k1, k2, k3)
			// The v4 peer is sent v4-mapped and stored (and reported) as AF_INET.
			e.wantKeys("all", e.keys(l, tcpao.KeyFilter{}), want{k: k3, name: "c"}, want{k: k2, name: "b"}, want{k: k1, name: "a"})
			e.wantErr("0.0.0.0/0 on AF_INET6", l.AddKey(mk(p("0.0.0.0/0"), 7, 8, "d"), tcpao.AddOptions{}), eINVAL)
			e.wantErr("::/0", l.AddKey(mk(p("::/0"), 7, 8, "d"), tcpao.AddOptions{}), nil)
			e.wantErr("v4 /33", l.AddKey(mk(p("::ffff:10.0.0.0/104"), 9, 9, "e"), tcpao.AddOptions{}), eINVAL)
			e.wantErr("delete v4 key", l.DelKey(ref(k3)), nil)
		}},
		{"listen/get-keys-ref-filter-prefix", func(t *testing.T, e env) {
			k1, k2 := mk(p("10.0.0.0/8"), 1, 1, "a"), mk(p("10.1.0.0/16"), 2, 2, "b")
			l := e.listener(lo4, k1, k2)
			// GET_KEYS compares addresses under the filter's prefix.
			r := tcpao.KeyRef{Peer: p("10.0.0.0/8"), SendID: 2, RecvID: 2}
			e.wantKeys("10/8 ids 2", e.keys(l, tcpao.KeyFilter{Ref: &r}), want{k: k2, name: "b"})
			r = tcpao.KeyRef{Peer: p("10.1.2.3/32"), SendID: 1, RecvID: 1}
			e.wantKeys("host under 10/8 ids 1", e.keys(l, tcpao.KeyFilter{Ref: &r}))
			r = tcpao.KeyRef{Peer: p("10.1.2.3/16"), SendID: 2, RecvID: 2}
			_, err := l.Keys(tcpao.KeyFilter{Ref: &r})
			e.wantErr("filter with host bits", err, eINVAL)
			_, err = l.Keys(tcpao.KeyFilter{Ref: &r, Current: true})
			e.wantErr("ref and current", err, tcpao.ErrFilter)
		}},
		{"listen/optmem-enomem", func(t *testing.T, e env) {
			limit, err := e.s.OptMemMax()
			if err != nil {
				t.Fatal(err)
			}
			n := tcpao.OptMemMaxKeys(limit, tcpao.HMACSHA1)
			l := e.listener(lo4)
			for i := 0; i <= n; i++ {
				k := mk(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), 1, 2, "a")
				err := l.AddKey(k, tcpao.AddOptions{})
				switch {
				case i < n && err != nil:
					t.Fatalf("key %d of the %d OptMemMaxKeys(%d) predicts: %v", i+1, n, limit, err)
				case i == n:
					e.wantErr("one key more than predicted", err, eNOMEM)
				}
			}
			t.Logf("optmem_max %d: %d hmac(sha1) keys fit (%d bytes each)", limit, n, tcpao.KeyOptMem(tcpao.HMACSHA1))
		}},
	}
}
