package gobgp

import "net/netip"

// The two routers' addresses, which exist only inside the test's pair of
// namespaces (lab.Pair).
var (
	addrA = netip.MustParseAddr("10.255.0.1")
	addrB = netip.MustParseAddr("10.255.0.2")
)

var (
	prefixA = netip.PrefixFrom(addrA, 30)
	prefixB = netip.PrefixFrom(addrB, 30)
)
