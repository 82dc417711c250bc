package tcpao

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkDecodeKeys decodes a TCP_AO_GET_KEYS answer of 16,384 hmac(sha1)
// keys (a listener of 16,384 peers), fingerprints included: Observe's
// user-space cost per listener.
func BenchmarkDecodeKeys(b *testing.B) {
	const n = 16384
	buf := make([]aoGetsockopt, n)
	for i := range buf {
		c := &buf[i]
		putSockaddr(&c.Addr, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), afINET)
		copy(c.AlgName[:], HMACSHA1)
		c.Prefix, c.SndID, c.RcvID, c.MACLen, c.KeyLen = 32, 1, 1, 12, 20
		for j := range 20 {
			c.Key[j] = byte(i + j)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := decodeKeys(buf, true)
		if err != nil || len(out) != n {
			b.Fatalf("decoded %d keys: %v", len(out), err)
		}
	}
}

// BenchmarkDecodeSessionKeys decodes a GET_KEYS answer of 3 keys (an
// established session's: old, new and backup key), fingerprints included:
// what every roll step of every peer pays per read.
func BenchmarkDecodeSessionKeys(b *testing.B) {
	buf := make([]aoGetsockopt, 3)
	for i := range buf {
		c := &buf[i]
		putSockaddr(&c.Addr, netip.AddrFrom4([4]byte{10, 1, 0, 1}), afINET)
		copy(c.AlgName[:], HMACSHA256)
		c.Prefix, c.SndID, c.RcvID, c.MACLen, c.KeyLen = 32, uint8(i+1), uint8(101+i), 12, 20
		for j := range 20 {
			c.Key[j] = byte(i + j)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := decodeKeys(buf, true)
		if err != nil || len(out) != 3 {
			b.Fatalf("decoded %d keys: %v", len(out), err)
		}
	}
}

// BenchmarkDecodeSessionKeysKnown is BenchmarkDecodeSessionKeys with the
// reader's desired keys known (KeyFilter.Known): a machine's read of its
// session.
func BenchmarkDecodeSessionKeysKnown(b *testing.B) {
	var secrets [][]byte
	var known []KnownKey
	for i := range 3 {
		s := []byte(fmt.Sprintf("session-secret-%d-of-twenty", i))[:20]
		secrets = append(secrets, s)
		known = append(known, KnownKey{SendID: uint8(i + 1), RecvID: uint8(101 + i), Secret: NewSecret(s)})
	}
	buf := sessionAnswer(secrets...)
	f := KeyFilter{Known: NewKnown(known)}
	b.ReportAllocs()
	for b.Loop() {
		out, err := decodeKeysFor(buf, f)
		if err != nil || len(out) != 3 {
			b.Fatalf("decoded %d keys: %v", len(out), err)
		}
	}
}
