package rotator

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// BenchmarkPlan plans 10,000 established peers with 4 keys each, mid-roll:
// three keys installed (one stale and current), one to add, RNext to move.
func BenchmarkPlan(b *testing.B) {
	const peers = 10000
	in := make([]Input, peers)
	for i := range in {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		ks := make([]tcpao.Key, 5)
		for j := range ks {
			ks[j] = mkKey(p.String(), uint8(j), uint8(j), fmt.Sprintf("k%d-%d", i, j))
		}
		d := Desired{Socket: SocketID(p.String()), WantCurrent: ID(4), WantRNext: ID(4)}
		for _, k := range ks[1:] {
			d.Keys = append(d.Keys, dk(k))
		}
		var o Observed
		o.HaveAO = true
		o.Info = tcpao.Info{HaveCurrent: true, HaveRNext: true}
		for j, k := range ks[:4] {
			o.Keys = append(o.Keys, tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, MACLen: 12,
				Fingerprint: k.Secret.Fingerprint(), IsCurrent: j == 0, IsRNext: j == 0})
		}
		in[i] = Input{Desired: d, Observed: o}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := PlanAll(in)
		if len(p[0].Ops) != 2 || len(p[0].Deferred) != 1 {
			b.Fatalf("unexpected plan %v", opLines(p[0]))
		}
	}
}
