package rotator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestAcceptedRemovesDelAsyncLeftovers: a key deleted from the listener with
// del_async was still copied to a socket accepted in the RCU window; the
// Accepted hook removes it (and adds a key the listener got later).
func TestAcceptedRemovesDelAsyncLeftovers(t *testing.T) {
	a, b, c := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo"), mkKey(peerA, 3, 3, "charlie")
	cases := []struct {
		name     string
		sock     func() *testSock
		wantKeys []uint8
		deferred int
	}{
		{"stale key not in use is deleted", func() *testSock {
			s := newEstablished(b)
			_ = s.AddKey(a, tcpao.AddOptions{})
			return s
		}, []uint8{2, 3}, 0},
		// The handshake verified with a (its pkt_good is the SYN-ACK's).
		{"stale key chosen by the peer's SYN stays for the roll", func() *testSock {
			s := newEstablished(a)
			_ = s.AddKey(b, tcpao.AddOptions{})
			return s
		}, []uint8{1, 2, 3}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctl := NewController(Options{Config: Config{Poll: time.Hour}})
			defer ctl.Close()
			ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(b), dk(c)}, WantCurrent: ID(2), WantRNext: ID(2)})
			s := tc.sock()
			sp, err := ctl.Accepted(pid("p"), s)
			if err != nil {
				t.Fatal(err)
			}
			if len(sp.Deferred) != tc.deferred {
				t.Fatalf("deferred %d, want %d", len(sp.Deferred), tc.deferred)
			}
			ctl.PeerDown(pid("p")) // stop the machine before reading the socket
			ks, _ := s.Keys(tcpao.KeyFilter{})
			var got []uint8
			for _, k := range ks {
				got = append(got, k.SendID)
			}
			slices.Sort(got) // the kernel lists the newest first
			if fmt.Sprint(got) != fmt.Sprint(tc.wantKeys) {
				t.Fatalf("keys %v, want %v", got, tc.wantKeys)
			}
		})
	}
	ctl := NewController(Options{})
	defer ctl.Close()
	if _, err := ctl.Accepted(pid("nobody"), newEstablished(a)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("err %v, want ErrUnknownPeer", err)
	}
}

// connect gives us and them a session of peer id on a new socket pair
// keyed with k (the far end with its mirror image), each accepted by its
// controller.
func connect(t *testing.T, us, them *Controller, id PeerID, k tcpao.Key) (x, y *testSock) {
	t.Helper()
	x, y = pair(k)
	us.SetDesired(id, want(k))
	them.SetDesired(id, want(mirror(k))) // the far end's keys name our address
	if _, err := us.Accepted(id, x); err != nil {
		t.Fatal(err)
	}
	if _, err := them.Accepted(id, y); err != nil {
		t.Fatal(err)
	}
	return x, y
}

// pump carries segments both ways on each session until ctx ends and
// counts drops.
func pump(ctx context.Context, wg *sync.WaitGroup, x, y *testSock, drops *int, mu *sync.Mutex) {
	defer wg.Done()
	for ctx.Err() == nil {
		okx, oky := x.sendTo(y), y.sendTo(x)
		if !okx || !oky {
			mu.Lock()
			*drops++
			mu.Unlock()
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestControllerPeersIndependent: one peer never installs the new key; the
// other rolls to completion meanwhile, each on its own goroutine.
func TestControllerPeersIndependent(t *testing.T) { synctest.Test(t, testControllerPeersIndependent) }

func testControllerPeersIndependent(t *testing.T) {
	cfg := Config{SwitchTimeout: time.Hour, Grace: 5 * time.Millisecond, Poll: time.Millisecond, Backoff: time.Hour}
	us := NewController(Options{Config: cfg})
	them := NewController(Options{Config: cfg})
	defer us.Close()
	defer them.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	drops := 0
	type sess struct {
		id   PeerID
		a, b tcpao.Key
		x, y *testSock
	}
	var ss []*sess
	for i, p := range []string{"192.0.2.1/32", "192.0.2.2/32"} {
		s := &sess{id: pid(p), a: mkKey(p, 1, 1, "a"), b: mkKey(p, 2, 2, fmt.Sprint("b", i))}
		s.x, s.y = connect(t, us, them, s.id, s.a)
		wg.Add(1)
		go pump(ctx, &wg, s.x, s.y, &drops, &mu)
		ss = append(ss, s)
	}
	// Both peers roll on our side; only the second peer's router follows.
	us.SetDesired(ss[0].id, want(ss[0].b))
	us.SetDesired(ss[1].id, want(ss[1].b))
	them.SetDesired(ss[1].id, want(mirror(ss[1].b)))
	waitUntil(t, 20*time.Second, "the fast peer's roll while the slow one waits", func() bool { return us.Status()[1].Rolls == 1 })
	if st := us.Status(); st[0].State != StateAnnounced || st[0].Rolls != 0 {
		t.Fatalf("slow peer: %+v", st[0])
	}
	cancel()
	wg.Wait()
	if drops != 0 {
		t.Fatalf("%d segments dropped", drops)
	}
	us.PeerDown(ss[0].id)
	if st := us.Status(); st[0].State != StateDown {
		t.Fatalf("after PeerDown: %+v", st[0])
	}
}

func TestListenerBatches(t *testing.T) {
	const peers = 10
	one := tcpao.KeyOptMem(tcpao.HMACSHA256)
	// The kernel's optmem_max is the batched peak (plus a byte): one peer's
	// new key over the old key set.
	lis := newListener(tcpaotest.WithOptMemMax((peers+1)*one + 1))
	d := Desired{Socket: "lis", Kind: Listening}
	for i := range peers {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 32).String()
		_ = lis.AddKey(mkKey(p, 1, 1, "old"), tcpao.AddOptions{})
		d.Keys = append(d.Keys, dk(mkKey(p, 2, 2, "new")))
	}
	obs := observe(t, lis)
	sp := PlanSocket(d, obs)
	all, _ := CheckOptMem("lis", obs, [][]Op{sp.Ops}, 0)
	batches := ListenerBatches(sp, 3)
	if len(batches) != 4 {
		t.Fatalf("%d batches, want 4", len(batches))
	}
	for _, b := range batches {
		seen := map[netip.Prefix]bool{}
		for i, op := range b {
			seen[op.Ref().Peer] = true
			if op.Kind == OpDel && (i == 0 || b[i-1].Ref().Peer != op.Ref().Peer || b[i-1].Kind != OpAdd) {
				t.Fatalf("delete not right after its peer's add: %v", op.Line())
			}
		}
		if len(seen) > 3 {
			t.Fatalf("batch holds %d peers", len(seen))
		}
	}
	peak, _ := CheckOptMem("lis", obs, batches, 0)
	if all != 2*peers*one || peak != (peers+1)*one {
		t.Fatalf("peak %d batched vs %d unbatched, want %d and %d", peak, all, (peers+1)*one, 2*peers*one)
	}
	// A limit below the peak fails before anything changes.
	lis.resetOps()
	_, err := SyncListener(lis, d, ListenerOptions{PeersPerBatch: 3, OptMemMax: func() (int, error) { return peak, nil }})
	if ops, _, _ := lis.counts(); !errors.Is(err, ErrOptMem) || !strings.Contains(err.Error(), "optmem_max") || ops != 0 {
		t.Fatalf("err %v after %d ops, want ErrOptMem before any op", err, ops)
	}
	if _, err := SyncListener(lis, d, ListenerOptions{PeersPerBatch: 1, OptMemMax: func() (int, error) { return peak + 1, nil }}); err != nil {
		t.Fatal(err)
	}
	if again := PlanSocket(d, observe(t, lis)); !again.Empty() {
		t.Fatalf("listener not converged: %v", opLines(again))
	}
}

func TestObserveWithoutAO(t *testing.T) {
	o, err := Observe(newEstablished(), ReadFull)
	if err != nil || o.HaveAO {
		t.Fatalf("observe: %+v %v", o, err)
	}
	_, err = Apply(newEstablished(), []Op{{Kind: OpAdd, Why: ReasonNew, Key: mkKey(peerA, 1, 1, "x")}})
	if !errors.Is(err, syscall.EISCONN) || !strings.Contains(err.Error(), "add send=1") {
		t.Fatalf("apply error %v does not wrap EISCONN and name the op", err)
	}
}
