package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// ErrNotEstablished is returned by Guard.Step (and Snapshot) when the
// session is not up: the step is not run.
var ErrNotEstablished = errors.New("bgp session is not established")

// ErrSessionDropped is matched (errors.Is) by every *DropError.
var ErrSessionDropped = errors.New("bgp session dropped")

// ErrNoPeer is returned when the speaker has no such neighbor.
var ErrNoPeer = errors.New("no such bgp neighbor")

// DropError says that a session went down, or came back on another
// connection, while a rotation step ran on it.
type DropError struct {
	Neighbor netip.Addr
	// Step names the rotation step the drop is recorded against.
	Step          string
	Before, After PeerInfo
	// Why is what changed: "state", "uptime", "flops" or "connection".
	Why string
	// StepErr is the step's own error, if it also failed.
	StepErr error
}

func (e *DropError) Error() string {
	s := fmt.Sprintf("bgp session with %s dropped during step %q (%s changed: state %s->%s, flops %d->%d)",
		e.Neighbor, e.Step, e.Why, e.Before.State, e.After.State, e.Before.Flops, e.After.Flops)
	if e.StepErr != nil {
		s += ": step error: " + e.StepErr.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrSessionDropped) true.
func (e *DropError) Is(target error) bool { return target == ErrSessionDropped }

// Unwrap returns the step's error.
func (e *DropError) Unwrap() error { return e.StepErr }

// PeerQuerier is what the guard needs of a Speaker: one neighbor's
// session, asked about that neighbor alone.
type PeerQuerier interface {
	Peer(ctx context.Context, neighbor netip.Addr, vrf string) (PeerInfo, error)
}

// PeerCache is what a PeerQuerier may offer besides: neighbor's session
// from what it holds, without a question to the speaker (ok false: it
// cannot vouch for it, ask). The guard tries it first and sets up the
// bounded question only on a miss: a fleet-wide roll makes eight guard
// lookups per peer, nearly all answered from the cache, and a timeout
// context for each cost a tenth of aokeyd's CPU in the emulated guest.
type PeerCache interface {
	CachedPeer(neighbor netip.Addr, vrf string) (PeerInfo, bool)
}

// DefaultQueryTimeout bounds each of the guard's questions to the speaker.
const DefaultQueryTimeout = 5 * time.Second

// Guard runs rotation steps only on Established sessions and checks they
// stay up.
type Guard struct {
	peers   PeerQuerier
	log     *slog.Logger
	timeout time.Duration

	mu     sync.Mutex
	before map[netip.Addr]Snapshot // Before's snapshots, for After
}

// NewGuard returns a guard reading sessions from peers; log may be nil.
// Each question to the speaker is bounded by DefaultQueryTimeout (see
// SetQueryTimeout).
func NewGuard(peers PeerQuerier, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{peers: peers, log: log, timeout: DefaultQueryTimeout, before: map[netip.Addr]Snapshot{}}
}

// SetQueryTimeout bounds each question to the speaker by d (on top of the
// caller's context); d <= 0 leaves the caller's context alone. Call it
// before the guard is used.
func (g *Guard) SetQueryTimeout(d time.Duration) { g.timeout = d }

// WaitingFor says what a question about neighbor waits for, for status.
func WaitingFor(neighbor netip.Addr) string {
	return "speaker: session state of " + neighbor.String()
}

// Before is the first half of Step for callers that run the step
// themselves (the rotator's SessionGuard hook): ErrNotEstablished means do
// not run the step; otherwise the session is remembered for After.
func (g *Guard) Before(ctx context.Context, neighbor netip.Addr, step string) error {
	s, err := g.Snapshot(ctx, neighbor)
	if err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	g.mu.Lock()
	g.before[neighbor] = s
	g.mu.Unlock()
	return nil
}

// After checks the session against the one Before saw: a *DropError when
// it dropped during step.
func (g *Guard) After(ctx context.Context, neighbor netip.Addr, step string) error {
	g.mu.Lock()
	s, ok := g.before[neighbor]
	delete(g.before, neighbor)
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("guard: After(%s, %q) without Before", neighbor, step)
	}
	err := g.Check(ctx, s, step)
	var d *DropError
	if errors.As(err, &d) {
		g.log.Warn("bgp session dropped during rotation step", "peer", d.After, "step", step, "changed", d.Why)
	}
	return err
}

// Snapshot is a session's health before a step.
type Snapshot struct{ Peer PeerInfo }

// Snapshot reads the session of neighbor; ErrNotEstablished if it is down.
func (g *Guard) Snapshot(ctx context.Context, neighbor netip.Addr) (Snapshot, error) {
	p, err := g.peer(ctx, neighbor)
	if err != nil {
		return Snapshot{}, err
	}
	if !p.Established() {
		return Snapshot{Peer: p}, fmt.Errorf("neighbor %s is %s: %w", neighbor, p.State, ErrNotEstablished)
	}
	return Snapshot{Peer: p}, nil
}

// Check compares the session now with s; a *DropError when it went down or
// was re-established (other uptime, flop count or ports) in between.
func (g *Guard) Check(ctx context.Context, s Snapshot, step string) error {
	p, err := g.peer(ctx, s.Peer.Neighbor)
	if err != nil {
		return err
	}
	if why := changed(s.Peer, p); why != "" {
		return &DropError{Neighbor: p.Neighbor, Step: step, Before: s.Peer, After: p, Why: why}
	}
	return nil
}

// Step runs fn on neighbor's session if it is Established and checks
// afterwards that it stayed up. It returns ErrNotEstablished without running
// fn, a *DropError (wrapping fn's error, if any) when the session dropped,
// or fn's error.
func (g *Guard) Step(ctx context.Context, neighbor netip.Addr, step string, fn func(ctx context.Context) error) error {
	s, err := g.Snapshot(ctx, neighbor)
	if err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	ferr := fn(ctx)
	if err := g.Check(ctx, s, step); err != nil {
		var d *DropError
		if errors.As(err, &d) {
			d.StepErr = ferr
			g.log.Warn("bgp session dropped during rotation step", "peer", d.After, "step", step, "changed", d.Why)
		}
		return err
	}
	return ferr
}

func (g *Guard) peer(ctx context.Context, neighbor netip.Addr) (PeerInfo, error) {
	if c, ok := g.peers.(PeerCache); ok {
		if p, ok := c.CachedPeer(neighbor, ""); ok {
			return g.answer(neighbor, p, nil)
		}
	}
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	p, err := g.peers.Peer(ctx, neighbor, "")
	return g.answer(neighbor, p, err)
}

// answer checks the speaker's (or the cache's) answer about neighbor.
func (g *Guard) answer(neighbor netip.Addr, p PeerInfo, err error) (PeerInfo, error) {
	if errors.Is(err, ErrNoPeer) {
		return PeerInfo{}, err
	}
	if err != nil {
		return PeerInfo{}, fmt.Errorf("session of %s: %w", neighbor, err)
	}
	if p.Neighbor != neighbor {
		return PeerInfo{}, fmt.Errorf("session of %s: the speaker answered about %s", neighbor, p.Neighbor)
	}
	return p, nil
}

// changed says what tells b's session from a's ("" when it is the same
// one). A field is compared only when both reports give it: a report from
// the speaker's event stream (Partial) has no uptime or flop count, and
// one from a listing has; between the two only the state and the
// connection's ports can differ. Compared as given, a session reported
// first by an event and then by a listing read as dropped ("uptime
// changed", established->established, flops 0->0): 126 false aborts in
// the set-up of a 512-peer fleet bench.
func changed(a, b PeerInfo) string {
	complete := !a.Partial && !b.Partial
	switch {
	case !b.Established():
		return "state"
	case !a.Uptime.IsZero() && !b.Uptime.IsZero() && !a.Uptime.Equal(b.Uptime):
		return "uptime"
	case complete && a.Flops != b.Flops:
		return "flops"
	case a.LocalPort != 0 && b.LocalPort != 0 && (a.LocalPort != b.LocalPort || a.RemotePort != b.RemotePort):
		return "connection"
	}
	return ""
}
