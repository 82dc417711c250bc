package rotator

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// BenchmarkPlanListenerCarried plans a listener of N peers, one key each,
// every key carried by its peer's session: the idle pass's listener plan
// (make bench's daemon item at 4,096 peers).
func BenchmarkPlanListenerCarried(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := Desired{Kind: Listening}
			var o Observed
			o.HaveAO = true
			for i := range n {
				a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
				k := mkKey(netip.PrefixFrom(a, 32).String(), 1, 101, "s")
				d.Keys = append(d.Keys, DesiredKey{Key: k})
				o.Keys = append(o.Keys, tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, Fingerprint: k.Secret.Fingerprint()})
				o.Carried = append(o.Carried, k.KeyRef)
			}
			b.ResetTimer()
			for b.Loop() {
				if sp := PlanSocket(d, o); !sp.Empty() {
					b.Fatalf("plan of a listener in step: %v", sp.Ops)
				}
			}
		})
	}
}
