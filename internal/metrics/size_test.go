package metrics

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRowSize: a series is a row of the allocator's 32-byte class, its
// labels besides the peer's one shared tuple (48 bytes took the 48-byte
// class: 0.5 MiB more at 32,768 series).
func TestRowSize(t *testing.T) {
	if n := unsafe.Sizeof(row{}); n > 32 {
		t.Errorf("row is %d bytes: over 32, the next size class is 48", n)
	}
}

// TestPeerRowsSize: a peer's rows of the default families fit the 96-byte
// size class; the per_key families' are apart (detailRows), made only
// when per_key exports them (all in one took the 160-byte class).
func TestPeerRowsSize(t *testing.T) {
	if n := unsafe.Sizeof(peerRows{}); n > 96 {
		t.Errorf("peerRows is %d bytes: over 96, the next size class is 112", n)
	}
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	steadyPeers(m, 4, 4)
	for p, pr := range m.peers.peers {
		if pr.detail != nil {
			t.Errorf("peer %v has per_key rows without per_key", p)
		}
	}
}

// TestBytesPerPeer: the live heap the default series of a steady peer
// with 4 keys keep before any scrape (8 series), at 4,096 peers: 1,046
// to 1,056 bytes with rows of 48 bytes, 919 to 928 with rows of 32, 843
// with the VRF's label shared and the peer label's strings one, 788 with
// the per_key families' rows apart.
func TestBytesPerPeer(t *testing.T) {
	const n, budget = 4096, 820
	read := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := read()
	steadyPeers(m, n, 4)
	got := int(read()-before) / n
	runtime.KeepAlive(m)
	t.Logf("%d bytes a peer", got)
	if got > budget {
		t.Errorf("%d bytes a peer, want at most %d", got, budget)
	}
}

// TestPeerLabels: peers of one VRF share its label; a peer's own label
// reads as before, escaped where the text format wants it.
func TestPeerLabels(t *testing.T) {
	s := newPeerStore(false)
	a, b := s.peer(Peer{Addr: "192.0.2.1", VRF: "blue"}).labels, s.peer(Peer{Addr: "192.0.2.2", VRF: "blue"}).labels
	if a.vrf != b.vrf {
		t.Error("two peers of one VRF have a label each")
	}
	odd := s.peer(Peer{Addr: `a"b\\c`}).labels
	for _, tt := range []struct {
		l                 *peerLabels
		value, text, both string
	}{
		{a, "192.0.2.1", `peer="192.0.2.1"`, `peer="192.0.2.1",vrf="blue"`},
		{odd, `a"b\\c`, `peer="a\"b\\\\c"`, `peer="a\"b\\\\c",vrf=""`},
	} {
		if tt.l.peer.value != tt.value || tt.l.peer.text != tt.text || tt.l.both != tt.both {
			t.Errorf("labels %q %q %q, want %q %q %q", tt.l.peer.value, tt.l.peer.text, tt.l.both, tt.value, tt.text, tt.both)
		}
	}
}
