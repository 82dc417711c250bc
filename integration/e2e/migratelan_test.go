//go:build denselan

package e2e

import (
	"net/netip"
	"testing"
	"time"
)

// The dense LAN's migration is a long run of its own (make migrate-lan),
// not part of make test: 200 sessions between two speakers in the guest
// beside make test's other scenarios would load its two vCPUs for
// minutes. This file builds only with the denselan tag.

// denseLAN is the dense peering LAN's size (issue 52 item 4: at least 200).
const denseLAN = 200

// TestMigrateDenseLAN (issue 52 item 4): a peering LAN's /24 whose 200
// members hold consecutive addresses (10.255.2.10 to .209, the router
// .1), all on TCP-MD5, each with a chain and key IDs of its own, moved by
// one `aoctl migrate --all`: every member's TCP-AO key goes on the
// listener at a prefix over its neighbours' passwords, the far end moves
// all of them with one configure, and no member's unsigned SYN is taken
// at any moment.
func TestMigrateDenseLAN(t *testing.T) {
	runMigrateBIRD(t, migrateLayout{n: denseLAN, bits: 24, ownChains: true, hold: 30, upWithin: 6 * time.Minute, bound: 4 * time.Minute,
		addr: func(i int) (a, b netip.Addr) {
			return netip.MustParseAddr("10.255.2.1"), netip.AddrFrom4([4]byte{10, 255, 2, byte(10 + i)})
		}})
}
