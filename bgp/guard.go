package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
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
	Peer peer.Key
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
		e.Peer, e.Step, e.Why, e.Before.State, e.After.State, e.Before.Flops, e.After.Flops)
	if e.StepErr != nil {
		s += ": step error: " + e.StepErr.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrSessionDropped) true.
func (e *DropError) Is(target error) bool { return target == ErrSessionDropped }

// Unwrap returns the step's error.
func (e *DropError) Unwrap() error { return e.StepErr }

// PeerQuerier is what the guard needs of a Speaker: one peer's session,
// asked about that peer alone.
type PeerQuerier interface {
	Peer(ctx context.Context, k peer.Key) (PeerInfo, error)
}

// PeerCache is what a PeerQuerier may offer besides: neighbor's session
// from what it holds, without a question to the speaker (ok false: it
// cannot vouch for it, ask). The guard tries it first and sets up the
// bounded question only on a miss: a fleet-wide roll makes eight guard
// lookups per peer, nearly all answered from the cache, and a timeout
// context for each cost a tenth of aokeyd's CPU in the emulated guest.
type PeerCache interface {
	CachedPeer(k peer.Key) (PeerInfo, bool)
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
	before map[peer.Key]snapshot // Before's snapshots, for After
}

// NewGuard returns a guard reading sessions from peers; log may be nil.
// Each question to the speaker is bounded by DefaultQueryTimeout (see
// SetQueryTimeout).
func NewGuard(peers PeerQuerier, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{peers: peers, log: log, timeout: DefaultQueryTimeout, before: map[peer.Key]snapshot{}}
}

// SetQueryTimeout bounds each question to the speaker by d (on top of the
// caller's context); d <= 0 leaves the caller's context alone. Call it
// before the guard is used.
func (g *Guard) SetQueryTimeout(d time.Duration) { g.timeout = d }

// WaitingFor says what a question about k waits for, for status.
func WaitingFor(k peer.Key) string {
	return "speaker: session state of " + k.String()
}

// Before is the first half of Step for callers that run the step
// themselves (the rotator's SessionGuard hook): ErrNotEstablished means do
// not run the step; otherwise the session is remembered for After.
func (g *Guard) Before(ctx context.Context, k peer.Key, step string) error {
	s, err := g.snapshot(ctx, k)
	if err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	g.mu.Lock()
	g.before[k] = s
	g.mu.Unlock()
	return nil
}

// After checks the session against the one Before saw: a *DropError when
// it dropped during step.
func (g *Guard) After(ctx context.Context, k peer.Key, step string) error {
	g.mu.Lock()
	s, ok := g.before[k]
	delete(g.before, k)
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("guard: After(%s, %q) without Before", k, step)
	}
	err := g.check(ctx, s, step)
	var d *DropError
	if errors.As(err, &d) {
		g.log.Warn("bgp session dropped during rotation step", "peer", d.After, "step", step, "changed", d.Why)
	}
	return err
}

// snapshot is a session's health before a step.
type snapshot struct{ peer PeerInfo }

// snapshot reads k's session; ErrNotEstablished if it is down.
func (g *Guard) snapshot(ctx context.Context, k peer.Key) (snapshot, error) {
	p, err := g.peer(ctx, k)
	if err != nil {
		return snapshot{}, err
	}
	if !p.Established() {
		return snapshot{peer: p}, fmt.Errorf("neighbor %s is %s: %w", k, p.State, ErrNotEstablished)
	}
	return snapshot{peer: p}, nil
}

// check compares the session now with s; a *DropError when it went down or
// was re-established (other uptime, flop count or ports) in between.
func (g *Guard) check(ctx context.Context, s snapshot, step string) error {
	k := s.peer.Key()
	p, err := g.peer(ctx, k)
	if err != nil {
		return err
	}
	if why := changed(s.peer, p); why != "" {
		return &DropError{Peer: k, Step: step, Before: s.peer, After: p, Why: why}
	}
	return nil
}

func (g *Guard) peer(ctx context.Context, k peer.Key) (PeerInfo, error) {
	if c, ok := g.peers.(PeerCache); ok {
		if p, ok := c.CachedPeer(k); ok {
			return g.answer(k, p, nil)
		}
	}
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	p, err := g.peers.Peer(ctx, k)
	return g.answer(k, p, err)
}

// answer checks the speaker's (or the cache's) answer about k: it must be
// about k, address and VRF.
func (g *Guard) answer(k peer.Key, p PeerInfo, err error) (PeerInfo, error) {
	if errors.Is(err, ErrNoPeer) {
		return PeerInfo{}, err
	}
	if err != nil {
		return PeerInfo{}, fmt.Errorf("session of %s: %w", k, err)
	}
	if p.Key() != k {
		return PeerInfo{}, fmt.Errorf("session of %s: the speaker answered about %s", k, p.Key())
	}
	return p, nil
}

// changed says what tells b's session from a's ("" when it is the same
// one). A field is compared only when both reports give it: a report from
// the speaker's event stream (Partial) has no uptime or flop count, and
// one from a listing has; between the two only the state and the
// connection's ports can differ. Compared as given, a session reported
// first by an event and then by a listing would read as dropped ("uptime
// changed", established->established, flops 0->0): a false abort.
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
	case a.Link.IsValid() && a.Neighbor != b.Neighbor:
		// An interface neighbour's address is learned: another one is
		// another connection, whatever its ports.
		return "connection"
	}
	return ""
}
