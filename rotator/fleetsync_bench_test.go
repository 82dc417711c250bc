package rotator

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// fleetListener is the listener of a fleet of n peers that share one key
// chain, as the daemon's fleet roll has it: three keys a peer with the
// same IDs on every peer (1/101, 2/102, 3/103), every session up carrying
// the first and third (Carried and Up).
func fleetListener(n int) (d Desired, s *listKernel, carried []tcpao.KeyRef) {
	d = Desired{Socket: "fleet", Kind: Listening}
	for i := range n {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32).String()
		for j := uint8(1); j <= 3; j++ {
			k := mkKey(p, j, 100+j, fmt.Sprintf("fleet-k%d", j))
			d.Keys = append(d.Keys, dk(k))
			if j != 2 {
				carried = append(carried, k.KeyRef)
			}
		}
	}
	s = newListKernel(len(d.Keys))
	if _, err := SyncListener(s, d, benchOpts()); err != nil {
		panic(err)
	}
	return d, s, carried
}

// BenchmarkSyncListenerFleet is one steady listener sync (nothing to do)
// of fleetListener(N) with the DownWatch on, a full pass's: its cost per
// peer (ns/peer) stays flat as N grows when nothing in it compares every
// key with every peer's.
func BenchmarkSyncListenerFleet(b *testing.B) {
	for _, n := range []int{64, 256, 1024, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d, s, carried := fleetListener(n)
			var w DownWatch
			o := benchOpts()
			o.Carried, o.Up, o.Down = carried, carried, &w
			b.ReportAllocs()
			for b.Loop() {
				if sp, err := SyncListener(s, d, o); err != nil || len(sp.Ops) != 0 {
					b.Fatalf("steady sync: %v, %v", sp.Ops, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/peer")
		})
	}
}
