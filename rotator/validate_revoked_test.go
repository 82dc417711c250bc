package rotator

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// revokedUnder is the key IDs id/id under n peers' /32s (peers from 10.0.0.0).
func revokedUnder(n int, id uint8) []RevokedKey {
	rs := make([]RevokedKey, n)
	for i := range rs {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		rs[i] = RevokedKey{KeyRef: tcpao.KeyRef{Peer: p, SendID: id, RecvID: id}}
	}
	return rs
}

// A desired key that is revoked is refused, compared by reference
// (normalised prefix, ifindex, IDs), whether the revoked keys are few
// (compared one by one) or many (a set: a revoke across a fleet's
// listener).
func TestValidateRevokedFewAndMany(t *testing.T) {
	for _, n := range []int{1, linearMax, linearMax + 1, 1024} {
		for _, tc := range []struct {
			name    string
			revoke  func(rs []RevokedKey) []RevokedKey
			refused bool
		}{
			{"other IDs", func(rs []RevokedKey) []RevokedKey { return rs }, false},
			{"a desired key's reference", func(rs []RevokedKey) []RevokedKey {
				return append(rs, RevokedKey{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix("10.0.0.0/32"), SendID: 7, RecvID: 7}})
			}, true},
			{"its prefix unmasked", func(rs []RevokedKey) []RevokedKey {
				return append(rs, RevokedKey{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix("10.9.0.7/16"), SendID: 8, RecvID: 8}})
			}, true},
			{"another ifindex", func(rs []RevokedKey) []RevokedKey {
				return append(rs, RevokedKey{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix("10.0.0.0/32"), IfIndex: 3, SendID: 7, RecvID: 7}})
			}, false},
		} {
			t.Run(fmt.Sprintf("%d/%s", n, tc.name), func(t *testing.T) {
				d := listenerKeys(n, 7)
				k := mkKey("10.9.0.0/16", 8, 8, "the-masked-one")
				d.Keys = append(d.Keys, dk(k))
				d.Revoked = tc.revoke(revokedUnder(n, 9))
				err := validateDesired(&d)
				if refused := err != nil && strings.Contains(err.Error(), "is revoked"); refused != tc.refused {
					t.Fatalf("validateDesired = %v, want refused %t", err, tc.refused)
				}
			})
		}
	}
}

// BenchmarkValidateRevokedListener validates a fleet listener's desired
// keys (three a peer) while a revoke names a key under every peer.
func BenchmarkValidateRevokedListener(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := listenerKeys(n, 1)
			for _, id := range []uint8{2, 3} {
				d.Keys = append(d.Keys, listenerKeys(n, id).Keys...)
			}
			d.Revoked = revokedUnder(n, 9)
			b.ReportAllocs()
			for b.Loop() {
				if err := validateDesired(&d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanRevokedListener plans a fleet listener (three keys a
// peer, all installed) while a revoke names a key under every peer
// (installed nowhere): the plan of every pass while the key source keeps
// the key revoked.
func BenchmarkPlanRevokedListener(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := listenerKeys(n, 1)
			for _, id := range []uint8{2, 3} {
				d.Keys = append(d.Keys, listenerKeys(n, id).Keys...)
			}
			rk := listenerKeys(n, 9)
			for i, r := range revokedUnder(n, 9) {
				r.Fingerprint = rk.Keys[i].Secret.Fingerprint()
				d.Revoked = append(d.Revoked, r)
			}
			o := Observed{HaveAO: true}
			for _, k := range d.Keys {
				o.Keys = append(o.Keys, tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, MACLen: tcpao.DefaultMACLen, Fingerprint: k.Secret.Fingerprint()})
			}
			b.ReportAllocs()
			for b.Loop() {
				if sp := PlanSocket(d, o); len(sp.Ops) != 0 || len(sp.Blocked) != 0 {
					b.Fatalf("plan %v", opLines(sp))
				}
			}
		})
	}
}
