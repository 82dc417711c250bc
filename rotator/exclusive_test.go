package rotator

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestExclusive: fn gets the running machine's own socket, and the machine
// then works towards the new desired state; without a running machine fn is
// not called.
func TestExclusive(t *testing.T) { synctest.Test(t, testExclusive) }

func testExclusive(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: time.Millisecond, Steady: time.Hour}})
	defer ctl.Close()
	called := false
	if ctl.Exclusive(context.Background(), pid("p"), Desired{}, func(tcpao.Socket) { called = true }) || called {
		t.Fatal("Exclusive ran fn for a peer without a machine")
	}
	ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)})
	s := newEstablished(a)
	_ = s.AddKey(b, tcpao.AddOptions{})
	if _, err := ctl.Accepted(pid("p"), s); err != nil {
		t.Fatal(err)
	}
	// Revoke-like: move current to b and delete a, then desire b alone.
	ok := ctl.Exclusive(context.Background(), pid("p"), Desired{Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}, func(got tcpao.Socket) {
		called = got == tcpao.Socket(s)
		if err := got.DelKey(tcpao.DelKey{KeyRef: a.KeyRef, SetCurrent: true, Current: 2, SetRNext: true, RNext: 2}); err != nil {
			t.Errorf("DelKey: %v", err)
		}
	})
	if !ok || !called {
		t.Fatalf("Exclusive ok=%t, fn on the machine's socket=%t", ok, called)
	}
	waitUntil(t, 5*time.Second, "the machine steady on key 2 after Exclusive", func() bool {
		st := ctl.Status()
		return len(st) == 1 && st[0].State == StateSteady && st[0].Current == ID(2) && st[0].LastError == ""
	})
	ctl.PeerDown(pid("p"))
	if ks, _ := s.Keys(tcpao.KeyFilter{}); len(ks) != 1 || ks[0].SendID != 2 {
		t.Fatalf("keys %+v, want b alone", ks)
	}
}

// TestExclusiveReadsInItsBorrow: the machine reads the socket back in the
// borrow Exclusive's fn ran in, and steps from that read: an emergency
// revoke across hundreds of sessions borrowed each one twice (the revoke's
// delete, then the woken machine's read), with the second borrows competing
// with the revoke's own for the CPU. It failed before (borrows [d] [r r]).
func TestExclusiveReadsInItsBorrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: time.Millisecond, Steady: time.Hour}})
		defer ctl.Close()
		both := Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}
		ctl.SetDesired(pid("p"), both)
		fs := newEstablished(a)
		_ = fs.AddKey(b, tcpao.AddOptions{})
		s := &borrowLog{testSock: fs}
		if _, err := ctl.Accepted(pid("p"), s); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := ctl.Status(); len(st) != 1 || st[0].State != StateSteady {
			t.Fatalf("status %+v, want steady", st)
		}
		before := len(s.borrows)
		ok := ctl.Exclusive(context.Background(), pid("p"), Desired{Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}, func(got tcpao.Socket) {
			if err := tcpao.DeleteKey(got, tcpao.DelKey{KeyRef: a.KeyRef, SetCurrent: true, Current: 2, SetRNext: true, RNext: 2}); err != nil {
				t.Errorf("DelKey: %v", err)
			}
		})
		if !ok {
			t.Fatal("Exclusive did not run")
		}
		synctest.Wait()
		got := s.borrows[before:]
		if len(got) != 1 || strings.Join(got[0], " ") != "d r r" {
			t.Errorf("borrows after Exclusive: %v, want one: [d r r] (the delete, then the read the machine steps from)", got)
		}
		if st := ctl.Status(); len(st) != 1 || st[0].State != StateSteady || st[0].Current != ID(2) || st[0].LastError != "" {
			t.Errorf("status %+v, want steady on key 2", st)
		}
	})
}

// heldBatch is a socket whose borrows (BatchKeys) it counts while they are
// held; a read in a borrow waits for readOK once armed.
type heldBatch struct {
	*testSock
	held   atomic.Int32
	armed  atomic.Bool
	readOK chan struct{}
}

func (h *heldBatch) BatchKeys(f func(tcpao.Socket) error) error {
	h.held.Add(1)
	defer h.held.Add(-1)
	return f(heldIn{h})
}

type heldIn struct{ h *heldBatch }

func (s heldIn) AddKey(k tcpao.Key, o tcpao.AddOptions) error { return s.h.testSock.AddKey(k, o) }
func (s heldIn) DelKey(d tcpao.DelKey) error                  { return s.h.testSock.DelKey(d) }
func (s heldIn) SetInfo(c tcpao.InfoChange) error             { return s.h.testSock.SetInfo(c) }
func (s heldIn) Info() (tcpao.Info, error) {
	if s.h.armed.Load() {
		<-s.h.readOK
	}
	return s.h.testSock.Info()
}
func (s heldIn) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) { return s.h.testSock.Keys(f) }

// TestExclusiveReturnsOnceTheBorrowEnds: Exclusive returns only once the
// borrow its fn ran in has ended, the machine's read-back in it included:
// a revoke that then asks the speaker to reset the session (its only key
// revoked) must not do so while aokeyd holds a duplicate of the session's
// descriptor, which keeps the connection open after the speaker closed it.
// It failed before (Exclusive returned during the read-back, and
// TestRevokeOnlyKey/reset failed now and then).
func TestExclusiveReturnsOnceTheBorrowEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		ctl := NewController(Options{Config: Config{Poll: 10 * time.Millisecond, Grace: time.Millisecond, Steady: time.Hour}})
		defer ctl.Close()
		ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)})
		fs := newEstablished(a)
		_ = fs.AddKey(b, tcpao.AddOptions{})
		s := &heldBatch{testSock: fs, readOK: make(chan struct{})}
		release := sync.OnceFunc(func() { s.armed.Store(false); close(s.readOK) })
		defer release() // before Close
		if _, err := ctl.Accepted(pid("p"), s); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s.armed.Store(true)
		returned := make(chan int32, 1)
		go func() {
			ctl.Exclusive(context.Background(), pid("p"), Desired{Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}, func(got tcpao.Socket) {
				_ = tcpao.DeleteKey(got, tcpao.DelKey{KeyRef: a.KeyRef, SetCurrent: true, Current: 2, SetRNext: true, RNext: 2})
			})
			returned <- s.held.Load()
		}()
		synctest.Wait() // the read-back waits in the borrow
		select {
		case n := <-returned:
			t.Fatalf("Exclusive returned while %d borrows were held (the read-back's)", n)
		default:
		}
		release()
		if n := <-returned; n != 0 {
			t.Errorf("Exclusive returned while %d borrows were held", n)
		}
	})
}
