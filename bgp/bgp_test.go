package bgp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

var (
	nbr    = netip.MustParseAddr("10.255.0.2")
	nbrKey = peer.KeyOf(nbr, "")
	local  = netip.MustParseAddr("10.255.0.1")
	t0     = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

func up(flops uint32, uptime time.Time, rport uint16) bgp.PeerInfo {
	return bgp.PeerInfo{Neighbor: nbr, Local: local, LocalPort: 179, RemotePort: rport, State: bgp.StateEstablished, Flops: flops, Uptime: uptime, Passive: true}
}

// event is an Established session as GoBGP's peer-state event reports it:
// no uptime, no flop count.
func event(rport uint16) bgp.PeerInfo {
	p := up(0, time.Time{}, rport)
	p.Partial = true
	return p
}

func TestGuardStep(t *testing.T) {
	down := up(1, time.Time{}, 0)
	down.State = bgp.StateActive
	tests := []struct {
		name    string
		before  bgp.PeerInfo
		after   bgp.PeerInfo
		stepErr error
		ran     bool
		wantErr error
		why     string
	}{
		{name: "stays up", before: up(0, t0, 40000), after: up(0, t0, 40000), ran: true},
		{name: "step error, session fine", before: up(0, t0, 40000), after: up(0, t0, 40000), stepErr: errors.New("EBUSY"), ran: true},
		{name: "not established: step not run", before: down, wantErr: bgp.ErrNotEstablished},
		{name: "went down", before: up(0, t0, 40000), after: down, ran: true, wantErr: bgp.ErrSessionDropped, why: "state"},
		{name: "flapped within the uptime second", before: up(0, t0, 40000), after: up(1, t0, 40000), ran: true, wantErr: bgp.ErrSessionDropped, why: "flops"},
		{name: "came back later", before: up(0, t0, 40000), after: up(1, t0.Add(5*time.Second), 40001), ran: true, wantErr: bgp.ErrSessionDropped, why: "uptime"},
		{name: "other connection", before: up(0, t0, 40000), after: up(0, t0, 40001), ran: true, wantErr: bgp.ErrSessionDropped, why: "connection"},
		// GoBGP's events give no uptime or flops, its listing does: the
		// same connection reported one way and then the other is the
		// same session (a DropError "uptime changed" before).
		{name: "event's report, then the listing's", before: event(40000), after: up(3, t0, 40000), ran: true},
		{name: "listing's report, then an event's", before: up(3, t0, 40000), after: event(40000), ran: true},
		{name: "event's report, then another connection", before: event(40000), after: up(3, t0, 40001), ran: true, wantErr: bgp.ErrSessionDropped, why: "connection"},
		{name: "event's report, then down", before: event(40000), after: down, ran: true, wantErr: bgp.ErrSessionDropped, why: "state"},
		{name: "drop and step error", before: up(0, t0, 40000), after: down, stepErr: errors.New("EBUSY"), ran: true, wantErr: bgp.ErrSessionDropped, why: "state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := bgptest.NewSpeaker("fake", 100, 1, tt.before)
			g := bgp.NewGuard(sp, nil)
			ran := false
			err := step(context.Background(), g, nbrKey, "step-1", func(context.Context) error {
				ran = true
				sp.Set(tt.after) // what the step saw happen to the session
				return tt.stepErr
			})
			if ran != tt.ran {
				t.Fatalf("step ran = %v, want %v", ran, tt.ran)
			}
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.stepErr != nil:
				if !errors.Is(err, tt.stepErr) {
					t.Fatalf("err = %v, want the step's error", err)
				}
			case err != nil:
				t.Fatal(err)
			}
			var d *bgp.DropError
			if tt.why != "" {
				if !errors.As(err, &d) || d.Why != tt.why || d.Step != "step-1" {
					t.Fatalf("drop = %+v, want why %q for step-1", d, tt.why)
				}
				if tt.stepErr != nil && !errors.Is(err, tt.stepErr) {
					t.Fatalf("drop does not wrap the step error: %v", err)
				}
			}
		})
	}
}

func TestGuardNoPeer(t *testing.T) {
	g := bgp.NewGuard(bgptest.NewSpeaker("fake", 100, 0), nil)
	if err := step(context.Background(), g, nbrKey, "s", func(context.Context) error { return nil }); !errors.Is(err, bgp.ErrNoPeer) {
		t.Fatalf("err = %v", err)
	}
}

type call struct {
	kind  string
	peer  netip.Addr
	inode uint64
}

type recObs struct{ calls chan call }

func (o *recObs) OnEstablished(_ context.Context, p bgp.PeerInfo, s bgp.SocketHandle) {
	o.calls <- call{"up", p.Neighbor, s.Ref().Inode}
}
func (o *recObs) OnDown(_ context.Context, p bgp.PeerInfo) { o.calls <- call{"down", p.Neighbor, 0} }

// connect registers with d a connection from local:lport to nbr:rport.
func connect(d *bgptest.Discoverer, lport, rport uint16) sockets.Ref {
	return d.Add(nil, netip.AddrPortFrom(local, lport), netip.AddrPortFrom(nbr, rport), false)
}

func TestTracker(t *testing.T) {
	sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 7)
	c := connect(disc, 179, 40000)
	obs := &recObs{calls: make(chan call, 16)}
	tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{Synced: func() { obs.calls <- call{kind: "synced"} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Run(ctx) }()
	expect := func(want call) {
		t.Helper()
		select {
		case got := <-obs.calls:
			if got != want {
				t.Fatalf("observer got %+v, want %+v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("observer got nothing, want %+v", want)
		}
	}
	idle := bgp.PeerInfo{Neighbor: nbr, State: bgp.StateIdle}
	// Sync from ListPeer: established, ports unknown -> found among the
	// connections to the neighbor.
	est := bgp.PeerInfo{Neighbor: nbr, Local: local, State: bgp.StateEstablished}
	sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{est}})
	expect(call{"up", nbr, c.Inode})
	expect(call{kind: "synced"}) // after the list's sessions, not per event
	// The same connection again: nothing new.
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: up(0, t0, 40000)})
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: idle})
	expect(call{"down", nbr, 0})
	// Re-established on a new connection: exact 4-tuple lookup.
	disc.Drop(c.Inode)
	c = connect(disc, 179, 40001)
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: up(1, t0, 40001)})
	expect(call{"up", nbr, c.Inode})
	// An active (outgoing) session is not handed over.
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: idle})
	expect(call{"down", nbr, 0})
	disc.Drop(c.Inode)
	c = connect(disc, 50000, 179)
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: bgp.PeerInfo{Neighbor: nbr, Local: local, LocalPort: 50000, RemotePort: 179, State: bgp.StateEstablished}})
	// A sync without the neighbor (removed from the config) while up.
	disc.Drop(c.Inode)
	c = connect(disc, 179, 40002)
	sp.Send(bgp.Event{Kind: bgp.EventState, Peer: up(2, t0, 40002)})
	expect(call{"up", nbr, c.Inode})
	sp.Send(bgp.Event{Kind: bgp.EventSync})
	expect(call{"down", nbr, 0})
	expect(call{kind: "synced"})
	cancel()
	sp.Close()
	<-done
}

func TestHandleRediscoversAfterRestart(t *testing.T) {
	sp := bgptest.NewSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 5)
	disc.LendFDs()
	anyAddr := netip.MustParseAddrPort("0.0.0.0:179")
	disc.Add(nil, anyAddr, netip.AddrPort{}, true)
	tr := bgp.NewTracker(sp, disc, &recObs{}, bgp.TrackerOptions{})
	hs, err := tr.Listeners(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("listeners %v %v", hs, err)
	}
	// gobgpd restarts: new pid, new listener.
	disc.Restart(200)
	relisten := disc.Add(nil, anyAddr, netip.AddrPort{}, true)
	sp.SetPID(200)
	var got int
	if err := hs[0].Do(func(fd int) error { got = fd; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != relisten.FD || hs[0].Ref().PID != 200 {
		t.Fatalf("after restart: fd %d ref %s, want the new listener's fd %d in pid 200", got, hs[0].Ref(), relisten.FD)
	}
	// gobgpd gone: stale.
	disc.Drop(relisten.Inode)
	if err := hs[0].Do(func(int) error { return nil }); !errors.Is(err, sockets.ErrStale) {
		t.Fatalf("err = %v, want stale", err)
	}
}

func TestGuardBeforeAfter(t *testing.T) {
	down := bgp.PeerInfo{Neighbor: nbr, State: bgp.StateIdle}
	tests := []struct {
		name          string
		first, then   bgp.PeerInfo // the session at Before, and at After
		before, after error
	}{
		{name: "healthy", first: up(0, t0, 1), then: up(0, t0, 1)},
		{name: "dropped", first: up(0, t0, 1), then: down, after: bgp.ErrSessionDropped},
		{name: "down before", first: down, before: bgp.ErrNotEstablished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := bgptest.NewSpeaker("fake", 100, 1, tt.first)
			g := bgp.NewGuard(sp, nil)
			err := g.Before(context.Background(), nbrKey, "switch")
			if !errors.Is(err, tt.before) || (tt.before == nil && err != nil) {
				t.Fatalf("Before: %v, want %v", err, tt.before)
			}
			if tt.before != nil {
				return
			}
			sp.Set(tt.then)
			err = g.After(context.Background(), nbrKey, "switch")
			if !errors.Is(err, tt.after) || (tt.after == nil && err != nil) {
				t.Fatalf("After: %v, want %v", err, tt.after)
			}
		})
	}
	if err := bgp.NewGuard(bgptest.NewSpeaker("fake", 100, 0, up(0, t0, 1)), nil).After(context.Background(), nbrKey, "x"); err == nil {
		t.Fatal("After without Before passed")
	}
}

// step runs fn between g's Before and After, as the rotator's machine runs
// a step: ErrNotEstablished without running fn, a *DropError (carrying
// fn's error) when the session dropped, else fn's error.
func step(ctx context.Context, g *bgp.Guard, k peer.Key, name string, fn func(context.Context) error) error {
	if err := g.Before(ctx, k, name); err != nil {
		return err
	}
	ferr := fn(ctx)
	if err := g.After(ctx, k, name); err != nil {
		var d *bgp.DropError
		if errors.As(err, &d) {
			d.StepErr = ferr
		}
		return err
	}
	return ferr
}
