package rotator

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// TestSteadyMachineKeepsNoGraceBase: the retire step's base (oldGood, a
// map of every key's pkt_good) lives for the grace period alone. A fleet
// of steady machines kept one each, 480 bytes a peer at four keys: 1.9 MiB
// at 4,096 peers.
func TestSteadyMachineKeepsNoGraceBase(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	l.mx.setDesired(want(b), l.now)
	l.my.setDesired(farDesired(want(b)), l.now)
	inGrace := false
	for range 2000 {
		l.tick()
		if l.mx.st.State == StateGrace {
			inGrace = true
			if l.mx.oldGood == nil {
				t.Fatal("in the grace period without the retire step's base")
			}
		}
		if l.mx.st.Rolls == 1 && l.my.st.Rolls == 1 {
			break
		}
	}
	if !inGrace || l.mx.st.Rolls != 1 {
		t.Fatalf("the roll did not go through the grace period to its end: %+v", l.mx.st)
	}
	for _, m := range []*machine{l.mx, l.my} {
		if m.st.State != StateSteady || m.oldGood != nil {
			t.Errorf("%s: state %s, grace base %v after the roll: want steady, none", m.st.Peer, m.st.State, m.oldGood)
		}
	}
}

// TestStatusSize: every machine keeps its Status and publishes a copy of
// it, which the allocator rounds up to a size class; 512 bytes is one
// (520 took 576, 64 bytes a peer more). A field that pushes it over
// should find room in the padding first.
func TestStatusSize(t *testing.T) {
	if n := unsafe.Sizeof(Status{}); n > 512 {
		t.Errorf("Status is %d bytes: over 512, its published copy takes the next size class (576)", n)
	}
}

// TestPerPeerSizes: a peer's machine and slot share its desired state
// (one Desired, not a copy in each: 168 bytes twice) and the machines of a
// controller share their Config, guard, jitter, logger and event sink by
// one pointer; the machine's peer is its Status's, and its Status is the
// one it published while it waits (handOff), not a copy of 512 bytes of
// its own. 1,136 bytes took the allocator's 1,152-byte class; 384 is the
// class it is in now (352 before the segment pace's 40 bytes, segpace.go:
// 128 KiB at 4,096 peers for a quarter of a roll's borrows at 1,024).
// A runner fits 144 bytes: its wake-up (wakeups.go) beside its flags.
func TestPerPeerSizes(t *testing.T) {
	if n := unsafe.Sizeof(machine{}); n > 384 {
		t.Errorf("machine is %d bytes: over 384, the next size class is 416", n)
	}
	if n := unsafe.Sizeof(peerSlot{}); n > 64 {
		t.Errorf("peerSlot is %d bytes: over 64 (does it hold a Desired again?)", n)
	}
	if n := unsafe.Sizeof(runner{}); n > 144 {
		t.Errorf("runner is %d bytes: over 144, the next size class is 160", n)
	}
}

// TestWaitingMachineSharesItsStatus: a machine that waits keeps no status
// of its own beside the one it published; the next run writes a copy,
// never the published one, which its readers may hold.
func TestWaitingMachineSharesItsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		ctl := NewController(Options{})
		defer ctl.Close()
		ctl.SetDesired(pid("p"), want(a))
		if _, err := ctl.Accepted(pid("p"), newEstablished(a)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctl.mu.Lock()
		r := ctl.peers[pid("p")].run
		ctl.mu.Unlock()
		pub := r.status.Load()
		if pub != r.m.st || !r.m.shared {
			t.Fatal("a waiting machine keeps a status of its own beside the published one")
		}
		before := *pub
		ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)}) // a run that changes the status
		synctest.Wait()
		now := r.status.Load()
		if now == pub || now.Desired != 2 || pub.Desired != before.Desired || pub.Since != before.Since || !pub.Counters.At.Equal(before.Counters.At) {
			t.Fatalf("the next run wrote the published status: was %+v, now %+v (new %+v)", before, *pub, *now)
		}
	})
}

// TestSteadyRunnerHasNoChannels: a runner's halting and done channels
// (its context's Done, PeerDown's wait) are made when someone first asks
// for them. A machine that steps and waits with no guard and no caller
// waiting holds neither: 192 bytes a peer at 4,096 steady peers. Once
// asked for, they behave as before: Done closes with the halt, PeerDown's
// channel once the runner ended.
func TestSteadyRunnerHasNoChannels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := mkKey(peerA, 1, 1, "alpha")
		ctl := NewController(Options{})
		defer ctl.Close()
		ctl.SetDesired(pid("p"), want(a))
		if _, err := ctl.Accepted(pid("p"), newEstablished(a)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // steps, waits and steps again
		synctest.Wait()
		ctl.mu.Lock()
		r := ctl.peers[pid("p")].run
		ctl.mu.Unlock()
		if st := r.status.Load(); st.State != StateSteady || st.Counters.At.IsZero() {
			t.Fatalf("the machine did not step: %+v", st)
		}
		r.mu.Lock()
		halting, done := r.halting, r.done
		r.mu.Unlock()
		if halting != nil || done != nil {
			t.Fatalf("a steady runner holds channels (halting %v, done %v)", halting, done)
		}
		ctx := context.Context(r)
		d := ctx.Done()
		if ctx.Err() != nil || d != ctx.Done() {
			t.Fatal("Done before the halt: not the same channel, or an error")
		}
		<-ctl.PeerDown(pid("p"))
		select {
		case <-d:
		default:
			t.Fatal("Done's channel is still open after the halt")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err after the halt: %v", ctx.Err())
		}
	})
}

// TestDownBaseSize: the DownWatch holds a base for each listener key no
// session carries (12,288 of the bench's 16,384 at 4,096 peers): the key
// is the map's, so a base is 40 bytes (it was a DownKey's 80 with the
// KeyRef again, 5.2 MiB in use in the guest's daemon item).
func TestDownBaseSize(t *testing.T) {
	if n := unsafe.Sizeof(downBase{}); n > 40 {
		t.Errorf("downBase is %d bytes: over 40 (does it hold its KeyRef again?)", n)
	}
}
