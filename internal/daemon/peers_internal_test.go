package daemon

import (
	"testing"
	"unsafe"
)

// TestPeerStateSize: the peer table keeps one peerState a peer, and a new
// one at every report of its session (updatePeer). It points to the
// policy's binding (BindingRef) rather than holding a 192-byte copy: at 376
// bytes it took the allocator's 384-byte class, at 192 it takes 192.
func TestPeerStateSize(t *testing.T) {
	if n := unsafe.Sizeof(peerState{}); n > 192 {
		t.Errorf("peerState is %d bytes: over 192, the next size class is 208", n)
	}
}
