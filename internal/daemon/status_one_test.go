package daemon_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// listingSpeaker counts the speaker's full neighbor listings (Peers) and
// its one-neighbor queries (Peer) by neighbor.
type listingSpeaker struct {
	bgp.Speaker
	mu       sync.Mutex
	listings int
	asked    map[netip.Addr]int
}

func (s *listingSpeaker) Peers(ctx context.Context) ([]bgp.PeerInfo, error) {
	s.mu.Lock()
	s.listings++
	s.mu.Unlock()
	return s.Speaker.Peers(ctx)
}

func (s *listingSpeaker) Peer(ctx context.Context, k peer.Key) (bgp.PeerInfo, error) {
	s.mu.Lock()
	s.asked[k.Addr]++
	s.mu.Unlock()
	return s.Speaker.Peer(ctx, k)
}

func (s *listingSpeaker) counts() (listings int, asked map[netip.Addr]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	asked = map[netip.Addr]int{}
	for a, n := range s.asked {
		asked[a] = n
	}
	return s.listings, asked
}

// `aoctl status PEER` builds that peer's status alone: it asks the speaker
// about that neighbor (not for its whole neighbor table, which a speaker
// with hundreds of neighbors answers slowly) and reads no other peer's
// socket. Status without a peer still lists every neighbor.
func TestStatusOfOnePeerTouchesNoOther(t *testing.T) {
	synctest.Test(t, testStatusOfOnePeerTouchesNoOther)
}

func testStatusOfOnePeerTouchesNoOther(t *testing.T) {
	const n = 8
	var sp *listingSpeaker
	f := newRevokeFleet(t, fleetOptions{n: n, speaker: func(s bgp.Speaker) bgp.Speaker {
		sp = &listingSpeaker{Speaker: s, asked: map[netip.Addr]int{}}
		return sp
	}})
	for _, one := range []int{3, 0, n - 1} {
		tc := struct{ peer string }{f.addr(one).String()}
		func() {
			synctest.Wait()
			l0, a0 := sp.counts()
			r0 := make([]int, n)
			for i, s := range f.socks {
				r0[i], _ = s.calls()
			}
			rep, err := f.d.Status(context.Background(), tc.peer)
			if err != nil {
				t.Fatalf("Status(%s): %v", tc.peer, err)
			}
			if len(rep.Peers) != 1 || rep.Peers[0].Peer != f.addr(one).String() {
				t.Fatalf("Status(%s): peers %+v, want %s alone", tc.peer, rep.Peers, f.addr(one))
			}
			if got := rep.Peers[0].Rotation.State; got != "steady" {
				t.Errorf("Status(%s): rotation state %q, want steady", tc.peer, got)
			}
			if len(rep.Peers[0].Keys) != 2 {
				t.Errorf("Status(%s): keys %+v, want the session's two", tc.peer, rep.Peers[0].Keys)
			}
			l1, a1 := sp.counts()
			if l1 != l0 {
				t.Errorf("Status(%s) listed the speaker's neighbors %d time(s): want none", tc.peer, l1-l0)
			}
			for a, c := range a1 {
				if a != f.addr(one) && c != a0[a] {
					t.Errorf("Status(%s) asked the speaker about %s", tc.peer, a)
				}
			}
			if a1[f.addr(one)] != a0[f.addr(one)]+1 {
				t.Errorf("Status(%s) asked the speaker about it %d times, want once", tc.peer, a1[f.addr(one)]-a0[f.addr(one)])
			}
			synctest.Wait()
			for i, s := range f.socks {
				if r, _ := s.calls(); i != one && r != r0[i] {
					t.Errorf("Status(%s) read peer %s's socket", tc.peer, f.addr(i))
				}
			}
		}()
	}
	rep, err := f.d.Status(context.Background(), "")
	if err != nil || len(rep.Peers) != n {
		t.Fatalf("Status(all): %d peers, %v; want %d", len(rep.Peers), err, n)
	}
	if _, err := f.d.Status(context.Background(), "10.9.9.9"); err == nil {
		t.Error("Status of an unknown peer: no error")
	}
}
