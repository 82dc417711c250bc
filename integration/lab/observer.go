package lab

import (
	"context"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
)

// Observer records what a bgp.Tracker hands over.
type Observer struct {
	Up   chan UpEvent
	Down chan bgp.PeerInfo
}

// UpEvent is one OnEstablished.
type UpEvent struct {
	Peer bgp.PeerInfo
	Sock bgp.SocketHandle
}

// NewObserver returns an Observer with room for a few events each way.
func NewObserver() *Observer {
	return &Observer{Up: make(chan UpEvent, 8), Down: make(chan bgp.PeerInfo, 8)}
}

// OnEstablished implements bgp.SessionObserver.
func (o *Observer) OnEstablished(_ context.Context, p bgp.PeerInfo, s bgp.SocketHandle) {
	o.Up <- UpEvent{p, s}
}

// OnDown implements bgp.SessionObserver.
func (o *Observer) OnDown(_ context.Context, p bgp.PeerInfo) { o.Down <- p }

// WaitUp returns the next established session, failing the test after
// timeout.
func (o *Observer) WaitUp(t testing.TB, timeout time.Duration) UpEvent {
	t.Helper()
	select {
	case e := <-o.Up:
		return e
	case <-time.After(timeout):
		t.Fatalf("tracker reported no established session in %s", timeout)
	}
	return UpEvent{}
}

// WaitDown returns the next session that went down, failing the test after
// timeout.
func (o *Observer) WaitDown(t testing.TB, timeout time.Duration) bgp.PeerInfo {
	t.Helper()
	select {
	case p := <-o.Down:
		return p
	case <-time.After(timeout):
		t.Fatalf("tracker reported no session down in %s", timeout)
	}
	return bgp.PeerInfo{}
}
