package gobgp

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
	api "github.com/osrg/gobgp/v3/api"
)

type nopObserver struct{}

func (nopObserver) OnEstablished(context.Context, bgp.PeerInfo, bgp.SocketHandle) {}
func (nopObserver) OnDown(context.Context, bgp.PeerInfo)                          {}

// TestGuardedRollRPCs counts, with the adapter's own RPC counter, what the
// guarded steps of one peer's roll (install, announce, switch, retire)
// cost gobgpd when the guard asks the tracker: nothing while the watch
// stream is synced; one ListPeer per question once the stream broke (the
// tracker cannot vouch until it resyncs). A drop reported on the stream
// during a step still fails it.
func TestGuardedRollRPCs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nb := peer.KeyOf(netip.MustParseAddr("10.255.0.2"), "")
		s1 := make(chan *api.WatchEventResponse, 4)
		f := &fakeAPI{streams: []chan *api.WatchEventResponse{s1}}
		est := listed("10.255.0.2", api.PeerState_ESTABLISHED, 0, true, "", 1_700_000_000)
		est.Transport.LocalPort, est.Transport.RemotePort = 179, 40000
		f.setPeers(est)
		sp := New(f, Options{PID: func(context.Context) (int, error) { return 100, nil }})
		disc := bgptest.NewDiscoverer(100, 7)
		disc.Add(nil, netip.MustParseAddrPort("10.255.0.1:179"), netip.MustParseAddrPort("10.255.0.2:40000"), false)
		tr := bgp.NewTracker(sp, disc, nopObserver{}, bgp.TrackerOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tr.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		g := bgp.NewGuard(tr, nil)
		roll := func() error {
			for _, step := range []string{"install", "announce", "switch", "retire"} {
				if err := guarded(ctx, g, nb, step, func(context.Context) error { return nil }); err != nil {
					return err
				}
			}
			return nil
		}
		lists := func() uint64 { return sp.RPCs()[MethodListPeer] }

		before := lists()
		if err := roll(); err != nil {
			t.Fatalf("roll: %v", err)
		}
		if got := lists() - before; got > 4 {
			t.Errorf("a roll with the stream synced cost %d ListPeer RPCs, want <= 4", got)
		} else {
			t.Logf("roll with the stream synced: %d ListPeer RPCs", got)
		}

		// A drop on the stream during a step fails it.
		err := guarded(ctx, g, nb, "switch", func(context.Context) error {
			f.setPeers(listed("10.255.0.2", api.PeerState_IDLE, 1, true, "", 0))
			s1 <- stateEvent("10.255.0.2", api.PeerState_IDLE, 0, 0)
			synctest.Wait()
			return nil
		})
		if !errors.Is(err, bgp.ErrSessionDropped) {
			t.Errorf("step with a drop on the stream: %v, want ErrSessionDropped", err)
		}

		// The stream breaks (no reconnect answers): every question goes to
		// gobgpd, about the one neighbor.
		f.setPeers(est)
		close(s1)
		synctest.Wait()
		before = lists()
		if err := roll(); err != nil {
			t.Fatalf("roll with the stream down: %v", err)
		}
		if got := lists() - before; got != 8 {
			t.Errorf("a roll with the stream down cost %d ListPeer RPCs, want 8 (one per question)", got)
		}
	})
}

// guarded runs fn between g's Before and After, as the rotator runs a step.
func guarded(ctx context.Context, g *bgp.Guard, k peer.Key, step string, fn func(context.Context) error) error {
	if err := g.Before(ctx, k, step); err != nil {
		return err
	}
	ferr := fn(ctx)
	if err := g.After(ctx, k, step); err != nil {
		return err
	}
	return ferr
}
