package tcpao

import (
	"fmt"
	"net/netip"
	"testing"
)

// sessionAnswer is a GET_KEYS answer holding secrets under IDs (i+1,
// 101+i).
func sessionAnswer(secrets ...[]byte) []aoGetsockopt {
	buf := make([]aoGetsockopt, len(secrets))
	for i, s := range secrets {
		c := &buf[i]
		putSockaddr(&c.Addr, netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)}), afINET)
		copy(c.AlgName[:], HMACSHA256)
		c.Prefix, c.SndID, c.RcvID, c.MACLen, c.KeyLen = 32, uint8(i+1), uint8(101+i), 12, uint8(len(s))
		copy(c.Key[:], s)
	}
	return buf
}

// A read with known secrets (KeyFilter.Known) decodes exactly what a read
// without them does, fingerprints included, whatever the known secrets
// are: the same bytes, other bytes, a prefix of the key's, other IDs, a
// zeroed secret beside a key of zeros, many (indexed) or few.
func TestKnownSecretsDecodeAsHMAC(t *testing.T) {
	alpha, bravo := []byte("known-secret-alpha"), []byte("known-secret-bravo")
	zeros := make([]byte, len(alpha))
	zeroed := NewSecret(alpha)
	zeroed.Zero() // its fingerprint is still alpha's
	many := func(extra ...KnownKey) []KnownKey {
		var ks []KnownKey
		for i := range 40 {
			ks = append(ks, KnownKey{SendID: uint8(i + 50), RecvID: uint8(i + 50), Secret: NewSecret([]byte(fmt.Sprintf("other-%d", i)))})
		}
		return append(ks, extra...)
	}
	for _, tc := range []struct {
		name   string
		answer [][]byte
		known  []KnownKey
	}{
		{"same bytes, same IDs", [][]byte{alpha, bravo}, []KnownKey{{1, 101, NewSecret(alpha)}, {2, 102, NewSecret(bravo)}}},
		{"other bytes, same IDs", [][]byte{alpha}, []KnownKey{{1, 101, NewSecret(bravo)}}},
		{"a prefix of the key", [][]byte{alpha}, []KnownKey{{1, 101, NewSecret(alpha[:len(alpha)-1])}}},
		{"the key a prefix of the secret", [][]byte{alpha[:4]}, []KnownKey{{1, 101, NewSecret(alpha)}}},
		{"same bytes, other IDs", [][]byte{alpha}, []KnownKey{{2, 102, NewSecret(alpha)}}},
		{"a zeroed secret, a key of zeros", [][]byte{zeros}, []KnownKey{{1, 101, zeroed}}},
		{"a zeroed secret, its old bytes", [][]byte{alpha}, []KnownKey{{1, 101, zeroed}}},
		{"indexed, same bytes", [][]byte{alpha, bravo}, many(KnownKey{1, 101, NewSecret(alpha)}, KnownKey{2, 102, NewSecret(bravo)})},
		{"indexed, other bytes", [][]byte{alpha, bravo}, many(KnownKey{1, 101, NewSecret(bravo)}, KnownKey{2, 102, NewSecret(alpha)})},
		{"duplicates", [][]byte{alpha}, []KnownKey{{1, 101, NewSecret(bravo)}, {1, 101, NewSecret(bravo)}, {1, 101, NewSecret(alpha)}}},
		{"none", [][]byte{alpha}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := decodeKeys(sessionAnswer(tc.answer...), true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeKeysFor(sessionAnswer(tc.answer...), KeyFilter{Known: NewKnown(tc.known)})
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("key %d with known secrets: %+v, want %+v (as fingerprinted by HMAC)", i, got[i], want[i])
				}
			}
		})
	}
}

// The known secrets stand in for the HMACs, for the keys a read would
// fingerprint and no others (KeyFilter.FingerprintIDs, SkipFingerprint).
func TestKnownSecretsFollowTheFilter(t *testing.T) {
	alpha, bravo := []byte("known-secret-alpha"), []byte("known-secret-bravo")
	known := NewKnown([]KnownKey{{1, 101, NewSecret(alpha)}, {2, 102, NewSecret(bravo)}})
	ids := [2]uint8{2, 102}
	for _, f := range []KeyFilter{{SkipFingerprint: true}, {FingerprintIDs: &ids}} {
		want, err := decodeKeysFor(sessionAnswer(alpha, bravo), f)
		if err != nil {
			t.Fatal(err)
		}
		f.Known = known
		got, err := decodeKeysFor(sessionAnswer(alpha, bravo), f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("filter %+v, key %d: %+v, want %+v", f, i, got[i], want[i])
			}
		}
	}
}

// Covers names the keys a read's Known fingerprints without an HMAC.
func TestKnownCovers(t *testing.T) {
	alpha, bravo := NewSecret([]byte("known-secret-alpha")), NewSecret([]byte("known-secret-bravo"))
	var many []KnownKey
	for i := range 20 {
		many = append(many, KnownKey{SendID: uint8(i), RecvID: uint8(i), Secret: NewSecret([]byte(fmt.Sprintf("many-%d", i)))})
	}
	for _, tc := range []struct {
		name   string
		known  []KnownKey
		send   uint8
		recv   uint8
		fp     Fingerprint
		covers bool
	}{
		{"its secret", []KnownKey{{1, 101, alpha}}, 1, 101, alpha.Fingerprint(), true},
		{"other material", []KnownKey{{1, 101, alpha}}, 1, 101, bravo.Fingerprint(), false},
		{"other IDs", []KnownKey{{1, 101, alpha}}, 2, 101, alpha.Fingerprint(), false},
		{"no fingerprint", []KnownKey{{1, 101, alpha}}, 1, 101, Fingerprint{}, false},
		{"indexed", append(many, KnownKey{1, 101, alpha}), 1, 101, alpha.Fingerprint(), true},
		{"indexed, other material", append(many, KnownKey{1, 101, alpha}), 1, 101, bravo.Fingerprint(), false},
	} {
		if got := NewKnown(tc.known).Covers(tc.send, tc.recv, tc.fp); got != tc.covers {
			t.Errorf("%s: Covers = %t, want %t", tc.name, got, tc.covers)
		}
	}
	if (*Known)(nil).Covers(1, 101, alpha.Fingerprint()) {
		t.Error("a nil Known covers a key")
	}
}
