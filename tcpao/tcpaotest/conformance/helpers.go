package conformance

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest/internal/errno"
)

// The Linux errno values the table expects: the model's own list
// (internal/errno), so that the two cannot drift apart.
const (
	eNOENT       = errno.ENOENT
	eNOMEM       = errno.ENOMEM
	eBUSY        = errno.EBUSY
	eEXIST       = errno.EEXIST
	eINVAL       = errno.EINVAL
	eMSGSIZE     = errno.EMSGSIZE
	eISCONN      = errno.EISCONN
	eKEYREJECTED = errno.EKEYREJECTED
)

func errnoName(e syscall.Errno) string { return errno.Name(e) }

// Loopback addresses: a v4 listener, two v4 clients (all of 127/8 is local
// on Linux) and the v6 loopback.
var (
	lo4  = netip.MustParseAddr("127.0.0.1")
	cli4 = netip.MustParseAddr("127.0.0.2")
	oth4 = netip.MustParseAddr("127.0.0.3")
	lo6  = netip.MustParseAddr("::1")
)

// env wraps a Stack with fatal-on-error helpers for one case.
type env struct {
	t *testing.T
	s Stack
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// mk builds a key; the secret is derived from name so that the two ends of a
// connection share it when they use the same name.
func mk(peer netip.Prefix, send, recv uint8, name string) tcpao.Key {
	return tcpao.Key{
		KeyRef:    tcpao.KeyRef{Peer: peer, SendID: send, RecvID: recv},
		Algorithm: tcpao.HMACSHA1,
		Secret:    tcpao.NewSecret([]byte("conformance-secret-" + name)),
	}
}

func ref(k tcpao.Key) tcpao.DelKey { return tcpao.DelKey{KeyRef: k.KeyRef} }

func (e env) socket(local netip.Addr) tcpao.Socket {
	e.t.Helper()
	s, err := e.s.Socket(local)
	if err != nil {
		e.t.Fatalf("socket(%s): %v", local, err)
	}
	return s
}

func (e env) listener(local netip.Addr, keys ...tcpao.Key) tcpao.Socket {
	e.t.Helper()
	s := e.socket(local)
	for _, k := range keys {
		e.add(s, k, tcpao.AddOptions{})
	}
	if err := e.s.Listen(s); err != nil {
		e.t.Fatalf("listen: %v", err)
	}
	return s
}

func (e env) add(s tcpao.Socket, k tcpao.Key, o tcpao.AddOptions) {
	e.t.Helper()
	if err := s.AddKey(k, o); err != nil {
		e.t.Fatalf("AddKey(%v, %+v): %v", k, o, err)
	}
}

func (e env) connect(c, l tcpao.Socket) tcpao.Socket {
	e.t.Helper()
	a, err := e.s.Connect(c, l)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	return a
}

func (e env) exchange(a, b tcpao.Socket, n int) {
	e.t.Helper()
	if err := e.s.Exchange(a, b, n); err != nil {
		e.t.Fatalf("exchange: %v", err)
	}
}

func (e env) info(s tcpao.Socket) tcpao.Info {
	e.t.Helper()
	in, err := s.Info()
	if err != nil {
		e.t.Fatalf("Info: %v", err)
	}
	return in
}

func (e env) keys(s tcpao.Socket, f tcpao.KeyFilter) []tcpao.KeyInfo {
	e.t.Helper()
	ks, err := s.Keys(f)
	if err != nil {
		e.t.Fatalf("Keys(%+v): %v", f, err)
	}
	return ks
}

// wantErr checks errors.Is(err, want); want nil means success.
func (e env) wantErr(what string, err, want error) {
	e.t.Helper()
	switch {
	case want == nil && err != nil:
		e.t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		e.t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// want describes one expected key: the key it was made from and its flags.
type want struct {
	k          tcpao.Key
	cur, rnext bool
	name       string // secret name, to check the fingerprint
}

// wantKeys compares a GET_KEYS answer with the expected keys in order.
func (e env) wantKeys(what string, got []tcpao.KeyInfo, ws ...want) {
	e.t.Helper()
	var g, w []string
	for _, k := range got {
		s := fmt.Sprintf("%v cur=%v rnext=%v alg=%s maclen=%d", k.KeyRef, k.IsCurrent, k.IsRNext, k.Algorithm, k.MACLen)
		for _, x := range ws {
			if x.k.KeyRef == k.KeyRef && x.k.Secret.Fingerprint() == k.Fingerprint {
				s += " secret=" + x.name
			}
		}
		g = append(g, s)
	}
	for _, x := range ws {
		ml := x.k.MACLen
		if ml == 0 {
			ml = tcpao.DefaultMACLen
		}
		w = append(w, fmt.Sprintf("%v cur=%v rnext=%v alg=%s maclen=%d secret=%s", x.k.KeyRef, x.cur, x.rnext, x.k.Algorithm, ml, x.name))
	}
	if !slices.Equal(g, w) {
		e.t.Fatalf("%s: GET_KEYS =\n\t%v\nwant\n\t%v", what, g, w)
	}
}

// keyCounters returns pkt_good/pkt_bad of the key with the given ids.
func (e env) keyCounters(s tcpao.Socket, send, recv uint8) (good, bad uint64) {
	e.t.Helper()
	for _, k := range e.keys(s, tcpao.KeyFilter{}) {
		if k.SendID == send && k.RecvID == recv {
			return k.PktGood, k.PktBad
		}
	}
	e.t.Fatalf("no key send=%d recv=%d", send, recv)
	return 0, 0
}

func u8(v uint8) *uint8 { return &v }
func bl(v bool) *bool   { return &v }

// eventually polls cond until it holds, failing the case after bound (a
// kernel's timer: the in-memory kernel's holds at once).
func (e env) eventually(what string, bound time.Duration, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(bound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %v", what, bound)
		}
	}
}
