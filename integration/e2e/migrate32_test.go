package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// migrateLayout is one shape of runMigrateBIRD's link: how many sessions,
// their two ends' addresses and their length, and the key chains.
type migrateLayout struct {
	n    int
	addr func(i int) (a, b netip.Addr) // session i: gobgpd's end (A) and BIRD's (B)
	bits int                           // the addresses' prefix length
	// peers is the one chain's peers (ownChains false); ownChains gives
	// each member a chain of its own (m0, m1, ...), its key's IDs its own.
	peers     string
	ownChains bool
	hold      int           // hold time, seconds (keepalive a third)
	upWithin  time.Duration // every session up on TCP-MD5
	bound     time.Duration // the migrations' bound
}

func (ly migrateLayout) chain(i int) string {
	if ly.ownChains {
		return fmt.Sprintf("m%d", i)
	}
	return "core"
}

// TestMigrateBIRD32 (issue 34): 32 sessions, each its own /30, one chain.
func TestMigrateBIRD32(t *testing.T) {
	runMigrateBIRD(t, migrateLayout{n: 32, bits: 30, peers: "10.255.1.0/24", hold: 9, upWithin: 3 * time.Minute, bound: 2 * time.Minute,
		addr: func(i int) (a, b netip.Addr) {
			base := netip.MustParseAddr("10.255.1.0").As4()
			base[3] = byte(4*i + 1)
			a = netip.AddrFrom4(base)
			base[3]++
			return a, netip.AddrFrom4(base)
		}})
}
