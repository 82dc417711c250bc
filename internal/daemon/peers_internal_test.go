package daemon

import (
	"testing"
	"unsafe"
)

// TestPeerStateSize: the peer table keeps one peerState a peer, and a new
// one at every report of its session (updatePeer). It points to the
// policy's binding (BindingRef) and to the tracker's report of the
// session (bgp.SessionInfo) rather than holding copies of 192 and 128
// bytes: at 376 bytes it took the allocator's 384-byte class, at 72 it
// takes 80.
func TestPeerStateSize(t *testing.T) {
	if n := unsafe.Sizeof(peerState{}); n > 80 {
		t.Errorf("peerState is %d bytes: over 80, the next size class is 96", n)
	}
}
