package bgp_test

import (
	"testing"
	"unsafe"

	"github.com/aokeyd/aokeyd/bgp"
)

// The session guard's cache holds a PeerInfo per peer as a map value: past
// 128 bytes each would cost an allocation (TestGuardAsksTheCacheFirst).
// What is for people only goes behind PeerInfo.About.
func TestPeerInfoSize(t *testing.T) {
	if n := unsafe.Sizeof(bgp.PeerInfo{}); n > 128 {
		t.Errorf("PeerInfo is %d bytes, want at most 128", n)
	}
}
