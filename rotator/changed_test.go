package rotator

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// changeLog counts Options.Changed calls per peer.
type changeLog struct {
	mu sync.Mutex
	n  map[PeerID]int
}

func (c *changeLog) changed(p PeerID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[PeerID]int{}
	}
	c.n[p]++
}

func (c *changeLog) get(p PeerID) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[p] }

// TestControllerChanged: a steady session's re-reads report nothing; a new
// socket, each roll step that writes the socket or moves the state, and
// an Exclusive call report a change (the fleet publisher's wake).
func TestControllerChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{SwitchTimeout: time.Hour, Grace: 50 * time.Millisecond, Poll: 10 * time.Millisecond, Steady: time.Second}
		var cl changeLog
		us := NewController(Options{Config: cfg, Changed: cl.changed})
		them := NewController(Options{Config: cfg})
		defer us.Close()
		defer them.Close()
		const pfx = "192.0.2.1/32"
		p := pid(pfx)
		a, b := mkKey(pfx, 1, 1, "a"), mkKey(pfx, 2, 2, "b")
		x, y := connect(t, us, them, p, a)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		drops := 0
		wg.Add(1)
		go pump(ctx, &wg, x, y, &drops, &mu)
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		up := cl.get(p)
		if up < 1 {
			t.Fatalf("after the session came up: %d changes, want the new socket's", up)
		}
		time.Sleep(10 * time.Second) // ten steady re-reads
		synctest.Wait()
		if n := cl.get(p); n != up {
			t.Fatalf("steady for 10s: %d changes, want still %d", n, up)
		}
		// A roll: install and announce, the peer's switch, retire.
		us.SetDesired(p, want(b))
		them.SetDesired(p, want(mirror(b)))
		waitUntil(t, 20*time.Second, "the roll", func() bool { st := us.Status(); return st[0].Rolls == 1 && st[0].State == StateSteady })
		rolled := cl.get(p)
		if rolled-up < 3 {
			t.Fatalf("a roll reported %d changes, want at least 3 (announce, switch, retire)", rolled-up)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := cl.get(p); n != rolled {
			t.Fatalf("steady after the roll: %d changes, want %d", n, rolled)
		}
		// An Exclusive call writes the socket.
		if !us.Exclusive(context.Background(), p, want(b), func(tcpao.Socket) {}) {
			t.Fatal("Exclusive did not run")
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := cl.get(p); n != rolled+1 {
			t.Fatalf("after Exclusive: %d changes, want %d", n, rolled+1)
		}
	})
}
