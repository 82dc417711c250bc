package bgp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// slowQuerier answers about ok at once and never about anyone else (it
// returns only when the caller's context ends, as a gRPC call does).
type slowQuerier struct {
	ok    bgp.PeerInfo
	asked []peer.Key
}

func (q *slowQuerier) Peer(ctx context.Context, k peer.Key) (bgp.PeerInfo, error) {
	q.asked = append(q.asked, k)
	if k == q.ok.Key() {
		return q.ok, nil
	}
	<-ctx.Done()
	return bgp.PeerInfo{}, ctx.Err()
}

// TestGuardQueryTimeout: the guard asks about the one neighbor, and each
// question is bounded by the guard's timeout, whatever the caller's
// context says.
func TestGuardQueryTimeout(t *testing.T) {
	slow := peer.KeyOf(netip.MustParseAddr("192.0.2.9"), "")
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		neighbor peer.Key
		wantErr  error
		wantTook time.Duration
	}{
		{name: "answered", timeout: bgp.DefaultQueryTimeout, neighbor: nbrKey},
		{name: "default timeout", timeout: bgp.DefaultQueryTimeout, neighbor: slow, wantErr: context.DeadlineExceeded, wantTook: bgp.DefaultQueryTimeout},
		{name: "own timeout", timeout: 300 * time.Millisecond, neighbor: slow, wantErr: context.DeadlineExceeded, wantTook: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := &slowQuerier{ok: up(0, time.Unix(1700000000, 0), 40000)}
				g := bgp.NewGuard(q, nil)
				if tc.timeout != bgp.DefaultQueryTimeout {
					g.SetQueryTimeout(tc.timeout)
				}
				start := time.Now()
				err := g.Before(context.Background(), tc.neighbor, "install")
				if took := time.Since(start); !errors.Is(err, tc.wantErr) || took != tc.wantTook {
					t.Fatalf("Before = %v after %s, want %v after %s", err, took, tc.wantErr, tc.wantTook)
				}
				if len(q.asked) != 1 || q.asked[0] != tc.neighbor {
					t.Errorf("asked about %v, want %s alone", q.asked, tc.neighbor)
				}
			})
		})
	}
}

// cachedQuerier is a PeerQuerier with a PeerCache that holds one session.
type cachedQuerier struct {
	held  bgp.PeerInfo
	asked int
}

func (q *cachedQuerier) Peer(context.Context, peer.Key) (bgp.PeerInfo, error) {
	q.asked++
	return q.held, nil
}

func (q *cachedQuerier) CachedPeer(k peer.Key) (bgp.PeerInfo, bool) {
	return q.held, k == q.held.Key()
}

// TestGuardAsksTheCacheFirst: a querier's cache answers the guard without
// a bounded question (no timeout context, no Peer call) for a session it
// holds, and a miss asks Peer. A guarded step on a cache hit costs the
// snapshot map's entry alone: before, every lookup set up a timeout
// context first (a timer and its context), a tenth of aokeyd's CPU at a
// fleet-wide roll in the emulated guest.
func TestGuardAsksTheCacheFirst(t *testing.T) {
	q := &cachedQuerier{held: up(0, t0, 40000)}
	g := bgp.NewGuard(q, nil)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if err := g.Before(ctx, nbrKey, "install"); err != nil {
			t.Fatal(err)
		}
		if err := g.After(ctx, nbrKey, "install"); err != nil {
			t.Fatal(err)
		}
	})
	if q.asked != 0 {
		t.Errorf("Peer asked %d times for a session the cache holds", q.asked)
	}
	if allocs > 1 {
		t.Errorf("a guarded step on a cache hit allocates %.0f times, want at most 1", allocs)
	}
	other := peer.KeyOf(netip.MustParseAddr("192.0.2.99"), "")
	if err := g.Before(ctx, other, "install"); err == nil || q.asked != 1 {
		t.Errorf("a neighbor the cache lacks: err %v after %d questions, want Peer asked once (and its answer, about %s, refused)", err, q.asked, nbr)
	}
}
