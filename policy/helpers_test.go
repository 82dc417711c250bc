package policy

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func life(start, end time.Duration) keystore.Lifetime {
	return keystore.Lifetime{Start: at(start), End: at(end)}
}

func from(start time.Duration) keystore.Lifetime { return keystore.Lifetime{Start: at(start)} }

// mkt builds a valid MKT with a 16-byte secret whose bytes are all fill.
func mkt(chain, name string, send, recv uint8, sendL, acceptL keystore.Lifetime) keystore.MKT {
	return keystore.MKT{
		Name: name, Chain: chain, SendID: send, RecvID: recv,
		Algorithm:    tcpao.HMACSHA256,
		Secret:       tcpao.NewSecret(bytes.Repeat([]byte{send + 1}, 16)),
		SendLifetime: sendL, AcceptLifetime: acceptL,
		Source: "test:" + chain + "/" + name,
	}
}

func snapshot(chains ...*keystore.Chain) *keystore.Snapshot {
	s := &keystore.Snapshot{Source: "test", ReadAt: t0, Chains: map[string]*keystore.Chain{}}
	for _, c := range chains {
		s.Chains[c.Name] = c
	}
	return s
}

func chain(name string, keys ...keystore.MKT) *keystore.Chain {
	return &keystore.Chain{Name: name, Keys: keys, Version: 1}
}

func mustParse(t testing.TB, src string, opts ...Option) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(src), opts...)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// keyNames lists the names of pk.Keys, with a "*" after the preferred one
// and a "+" after other sendable ones.
func keyNames(pk PeerKeys) []string {
	var out []string
	for i, k := range pk.Keys {
		n := k.MKT.Name
		switch {
		case i == pk.Preferred:
			n += "*"
		case k.Sendable:
			n += "+"
		}
		out = append(out, n)
	}
	return out
}
