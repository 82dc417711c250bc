package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

var (
	nbr    = netip.MustParseAddr("10.255.0.2")
	nbrKey = peer.KeyOf(nbr, "")
	local  = netip.MustParseAddr("10.255.0.1")
	t0     = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

func up(flops uint32, uptime time.Time, rport uint16) PeerInfo {
	return PeerInfo{Neighbor: nbr, Local: local, LocalPort: 179, RemotePort: rport, State: StateEstablished, Flops: flops, Uptime: uptime, Passive: true}
}

// event is an Established session as GoBGP's peer-state event reports it:
// no uptime, no flop count.
func event(rport uint16) PeerInfo {
	p := up(0, time.Time{}, rport)
	p.Partial = true
	return p
}

// seqPeers returns the scripted peer lists one call at a time (the last
// one repeats).
type seqPeers struct {
	mu    sync.Mutex
	lists [][]PeerInfo
	err   error
}

func (s *seqPeers) Peers(context.Context) ([]PeerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	l := s.lists[0]
	if len(s.lists) > 1 {
		s.lists = s.lists[1:]
	}
	return l, nil
}

// Peer is the guard's question: the neighbor from the next scripted list.
func (s *seqPeers) Peer(ctx context.Context, k peer.Key) (PeerInfo, error) {
	ps, err := s.Peers(ctx)
	if err != nil {
		return PeerInfo{}, err
	}
	for _, p := range ps {
		if p.Key() == k {
			return p, nil
		}
	}
	return PeerInfo{}, fmt.Errorf("%w: %s", ErrNoPeer, k)
}

func TestGuardStep(t *testing.T) {
	down := up(1, time.Time{}, 0)
	down.State = StateActive
	tests := []struct {
		name    string
		before  PeerInfo
		after   PeerInfo
		stepErr error
		ran     bool
		wantErr error
		why     string
	}{
		{name: "stays up", before: up(0, t0, 40000), after: up(0, t0, 40000), ran: true},
		{name: "step error, session fine", before: up(0, t0, 40000), after: up(0, t0, 40000), stepErr: errors.New("EBUSY"), ran: true},
		{name: "not established: step not run", before: down, wantErr: ErrNotEstablished},
		{name: "went down", before: up(0, t0, 40000), after: down, ran: true, wantErr: ErrSessionDropped, why: "state"},
		{name: "flapped within the uptime second", before: up(0, t0, 40000), after: up(1, t0, 40000), ran: true, wantErr: ErrSessionDropped, why: "flops"},
		{name: "came back later", before: up(0, t0, 40000), after: up(1, t0.Add(5*time.Second), 40001), ran: true, wantErr: ErrSessionDropped, why: "uptime"},
		{name: "other connection", before: up(0, t0, 40000), after: up(0, t0, 40001), ran: true, wantErr: ErrSessionDropped, why: "connection"},
		// GoBGP's events give no uptime or flops, its listing does: the
		// same connection reported one way and then the other is the
		// same session (a DropError "uptime changed" before).
		{name: "event's report, then the listing's", before: event(40000), after: up(3, t0, 40000), ran: true},
		{name: "listing's report, then an event's", before: up(3, t0, 40000), after: event(40000), ran: true},
		{name: "event's report, then another connection", before: event(40000), after: up(3, t0, 40001), ran: true, wantErr: ErrSessionDropped, why: "connection"},
		{name: "event's report, then down", before: event(40000), after: down, ran: true, wantErr: ErrSessionDropped, why: "state"},
		{name: "drop and step error", before: up(0, t0, 40000), after: down, stepErr: errors.New("EBUSY"), ran: true, wantErr: ErrSessionDropped, why: "state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(&seqPeers{lists: [][]PeerInfo{{tt.before}, {tt.after}}}, nil)
			ran := false
			err := step(context.Background(), g, nbrKey, "step-1", func(context.Context) error { ran = true; return tt.stepErr })
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
			var d *DropError
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
	g := NewGuard(&seqPeers{lists: [][]PeerInfo{{}}}, nil)
	if err := step(context.Background(), g, nbrKey, "s", func(context.Context) error { return nil }); !errors.Is(err, ErrNoPeer) {
		t.Fatalf("err = %v", err)
	}
}

// fakeSpeaker delivers scripted events.
type fakeSpeaker struct {
	ch  chan Event
	pid int
}

func (f *fakeSpeaker) Name() string                              { return "fake" }
func (f *fakeSpeaker) Peers(context.Context) ([]PeerInfo, error) { return nil, nil }
func (f *fakeSpeaker) Peer(_ context.Context, n peer.Key) (PeerInfo, error) {
	return PeerInfo{}, fmt.Errorf("%w: %s", ErrNoPeer, n)
}
func (f *fakeSpeaker) Watch(context.Context) (<-chan Event, error) { return f.ch, nil }
func (f *fakeSpeaker) ResetPeer(context.Context, peer.Key, string) error {
	return nil
}
func (f *fakeSpeaker) PID(context.Context) (int, error) { return f.pid, nil }

// fakeDisc knows the sockets of fake processes.
type fakeDisc struct {
	mu    sync.Mutex
	conns map[int][]sockets.Ref // pid -> established sockets
	lis   map[int][]sockets.Ref
	used  []sockets.Ref
}

func (d *fakeDisc) Listeners(pid int, port uint16) ([]sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lis[pid], nil
}

func (d *fakeDisc) Established(pid int, l, r netip.AddrPort) (sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.conns[pid] {
		if s.Local == l && s.Remote == r {
			return s, nil
		}
	}
	return sockets.Ref{}, sockets.ErrNotFound
}

func (d *fakeDisc) Connections(pid int, n netip.Addr) ([]sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []sockets.Ref
	for _, s := range d.conns[pid] {
		if s.Remote.Addr() == n {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *fakeDisc) With(ref sockets.Ref, fn func(int) error) error {
	d.mu.Lock()
	alive := false
	for _, s := range append(d.conns[ref.PID], d.lis[ref.PID]...) {
		alive = alive || s.Inode == ref.Inode
	}
	d.used = append(d.used, ref)
	d.mu.Unlock()
	if !alive {
		return sockets.ErrStale
	}
	return fn(ref.FD)
}

type call struct {
	kind  string
	peer  netip.Addr
	inode uint64
}

type recObs struct{ calls chan call }

func (o *recObs) OnEstablished(_ context.Context, p PeerInfo, s SocketHandle) {
	o.calls <- call{"up", p.Neighbor, s.Ref().Inode}
}
func (o *recObs) OnDown(_ context.Context, p PeerInfo) { o.calls <- call{"down", p.Neighbor, 0} }

func conn(pid int, inode uint64, lport, rport uint16) sockets.Ref {
	return sockets.Ref{PID: pid, Inode: inode, FD: int(inode), Local: netip.AddrPortFrom(local, lport), Remote: netip.AddrPortFrom(nbr, rport)}
}

func TestTracker(t *testing.T) {
	sp := &fakeSpeaker{ch: make(chan Event), pid: 100}
	disc := &fakeDisc{conns: map[int][]sockets.Ref{100: {conn(100, 7, 179, 40000)}}}
	obs := &recObs{calls: make(chan call, 16)}
	tr := NewTracker(sp, disc, obs, TrackerOptions{Synced: func() { obs.calls <- call{kind: "synced"} }})
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
	idle := PeerInfo{Neighbor: nbr, State: StateIdle}
	// Sync from ListPeer: established, ports unknown -> found among the
	// connections to the neighbor.
	est := PeerInfo{Neighbor: nbr, Local: local, State: StateEstablished}
	sp.ch <- Event{Kind: EventSync, Peers: []PeerInfo{est}}
	expect(call{"up", nbr, 7})
	expect(call{kind: "synced"}) // after the list's sessions, not per event
	// The same connection again: nothing new.
	sp.ch <- Event{Kind: EventState, Peer: up(0, t0, 40000)}
	sp.ch <- Event{Kind: EventState, Peer: idle}
	expect(call{"down", nbr, 0})
	// Re-established on a new connection: exact 4-tuple lookup.
	disc.mu.Lock()
	disc.conns[100] = []sockets.Ref{conn(100, 8, 179, 40001)}
	disc.mu.Unlock()
	sp.ch <- Event{Kind: EventState, Peer: up(1, t0, 40001)}
	expect(call{"up", nbr, 8})
	// An active (outgoing) session is not handed over.
	sp.ch <- Event{Kind: EventState, Peer: idle}
	expect(call{"down", nbr, 0})
	disc.mu.Lock()
	disc.conns[100] = []sockets.Ref{conn(100, 9, 50000, 179)}
	disc.mu.Unlock()
	sp.ch <- Event{Kind: EventState, Peer: PeerInfo{Neighbor: nbr, Local: local, LocalPort: 50000, RemotePort: 179, State: StateEstablished}}
	// A sync without the neighbor (removed from the config) while up.
	disc.mu.Lock()
	disc.conns[100] = []sockets.Ref{conn(100, 10, 179, 40002)}
	disc.mu.Unlock()
	sp.ch <- Event{Kind: EventState, Peer: up(2, t0, 40002)}
	expect(call{"up", nbr, 10})
	sp.ch <- Event{Kind: EventSync}
	expect(call{"down", nbr, 0})
	expect(call{kind: "synced"})
	cancel()
	close(sp.ch)
	<-done
}

func TestHandleRediscoversAfterRestart(t *testing.T) {
	sp := &fakeSpeaker{pid: 100}
	disc := &fakeDisc{lis: map[int][]sockets.Ref{100: {{PID: 100, Inode: 5, FD: 5, Local: netip.MustParseAddrPort("0.0.0.0:179"), Listening: true}}}}
	tr := NewTracker(sp, disc, &recObs{}, TrackerOptions{})
	hs, err := tr.Listeners(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("listeners %v %v", hs, err)
	}
	// gobgpd restarts: new pid, new listener.
	disc.mu.Lock()
	disc.lis = map[int][]sockets.Ref{200: {{PID: 200, Inode: 6, FD: 4, Local: netip.MustParseAddrPort("0.0.0.0:179"), Listening: true}}}
	disc.mu.Unlock()
	sp.pid = 200
	var got int
	if err := hs[0].Do(func(fd int) error { got = fd; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != 4 || hs[0].Ref().PID != 200 {
		t.Fatalf("after restart: fd %d ref %s", got, hs[0].Ref())
	}
	// gobgpd gone: stale.
	disc.mu.Lock()
	disc.lis = nil
	disc.mu.Unlock()
	if err := hs[0].Do(func(int) error { return nil }); !errors.Is(err, sockets.ErrStale) {
		t.Fatalf("err = %v, want stale", err)
	}
}

func TestGuardBeforeAfter(t *testing.T) {
	down := PeerInfo{Neighbor: nbr, State: StateIdle}
	tests := []struct {
		name       string
		lists      [][]PeerInfo
		before     error
		after      error
		skipBefore bool
	}{
		{name: "healthy", lists: [][]PeerInfo{{up(0, t0, 1)}, {up(0, t0, 1)}}},
		{name: "dropped", lists: [][]PeerInfo{{up(0, t0, 1)}, {down}}, after: ErrSessionDropped},
		{name: "down before", lists: [][]PeerInfo{{down}}, before: ErrNotEstablished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(&seqPeers{lists: tt.lists}, nil)
			err := g.Before(context.Background(), nbrKey, "switch")
			if !errors.Is(err, tt.before) || (tt.before == nil && err != nil) {
				t.Fatalf("Before: %v, want %v", err, tt.before)
			}
			if tt.before != nil {
				return
			}
			err = g.After(context.Background(), nbrKey, "switch")
			if !errors.Is(err, tt.after) || (tt.after == nil && err != nil) {
				t.Fatalf("After: %v, want %v", err, tt.after)
			}
		})
	}
	if err := NewGuard(&seqPeers{lists: [][]PeerInfo{{up(0, t0, 1)}}}, nil).After(context.Background(), nbrKey, "x"); err == nil {
		t.Fatal("After without Before passed")
	}
}

// step runs fn between g's Before and After, as the rotator's machine runs
// a step: ErrNotEstablished without running fn, a *DropError (carrying
// fn's error) when the session dropped, else fn's error.
func step(ctx context.Context, g *Guard, k peer.Key, name string, fn func(context.Context) error) error {
	if err := g.Before(ctx, k, name); err != nil {
		return err
	}
	ferr := fn(ctx)
	if err := g.After(ctx, k, name); err != nil {
		var d *DropError
		if errors.As(err, &d) {
			d.StepErr = ferr
		}
		return err
	}
	return ferr
}
