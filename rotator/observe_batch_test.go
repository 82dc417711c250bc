package rotator

import (
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// batchCounter is a socket whose calls cost one borrow of the descriptor
// each, unless they run inside BatchKeys (one borrow for the batch), like
// bgp's AOSocket over pidfd_getfd.
type batchCounter struct {
	*fakeSock
	borrows int
	inBatch bool
}

func (b *batchCounter) borrow() {
	if !b.inBatch {
		b.borrows++
	}
}

func (b *batchCounter) BatchKeys(f func(tcpao.Socket) error) error {
	b.borrows++
	b.inBatch = true
	defer func() { b.inBatch = false }()
	return f(b.fakeSock)
}

func (b *batchCounter) Info() (tcpao.Info, error) { b.borrow(); return b.fakeSock.Info() }
func (b *batchCounter) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	b.borrow()
	return b.fakeSock.Keys(f)
}

// TestObserveBorrowsOnce: reading a socket (TCP_AO_INFO and GET_KEYS) is
// one borrow of the speaker's descriptor, not one per socket option: every
// step of every peer's roll reads its socket, and on a real kernel each
// borrow is pidfd_open, pidfd_getfd, fstat, SO_COOKIE and two closes.
// It failed before Observe used BatchKeys (2 borrows).
func TestObserveBorrowsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		sock *fakeSock
	}{
		{"established", newFakeEstablished(mkKey("192.0.2.2/32", 1, 101, "a"))},
		{"listener", listenerWith(t, mkKey("192.0.2.0/24", 1, 101, "a"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &batchCounter{fakeSock: tc.sock}
			if _, err := Observe(b); err != nil {
				t.Fatal(err)
			}
			if b.borrows != 1 {
				t.Errorf("Observe borrowed the socket %d times, want 1", b.borrows)
			}
		})
	}
}

func listenerWith(t *testing.T, k tcpao.Key) *fakeSock {
	s := newFakeListener()
	if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}
