package daemon

import (
	"context"
	"slices"
	"sync"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// fakeExecutor is an in-memory Executor: each peer's written list follows
// Submit at once (the plan applied as birdnative's listOf applies it to a
// file, and the keys it drops taken off the session, as the speaker's
// reconfigure does), and its session is what the test scripts
// (SetSession, SetUnread).
// Clean reports the peers whose written list or session still hold ref.
type fakeExecutor struct {
	mu      sync.Mutex
	written map[peer.Key][]tcpao.KeyInfo
	session map[peer.Key]*rotator.Observed
	unread  map[peer.Key]error
	submits [][]ExecPlan
	done    func(ExecOutcome)
	reads   map[peer.Key]int // Observe's, per peer
	// observeGate, when set, holds the next Observe until it is closed
	// or its context ends (observeHeld counts those held).
	observeGate chan struct{}
	observeHeld int
	// hold, when set, holds the outcome of a revoke's plans (the lists
	// are written at once) until it is closed: a speaker's reconfigure
	// still under way.
	hold chan struct{}
}

// HoldRevokes holds the outcome of every revoke's Submit until the
// returned function is called.
func (f *fakeExecutor) HoldRevokes() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = make(chan struct{})
	h := f.hold
	return func() { close(h) }
}

var _ Executor = (*fakeExecutor)(nil)

func newFakeExecutor() *fakeExecutor {
	return &fakeExecutor{written: map[peer.Key][]tcpao.KeyInfo{}, session: map[peer.Key]*rotator.Observed{}, unread: map[peer.Key]error{}}
}

func (f *fakeExecutor) Name() string { return "fake" }

// SetSession scripts the peer's session (nil: none up).
func (f *fakeExecutor) SetSession(id peer.Key, s *rotator.Observed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.session[id] = s
}

// SetUnread scripts a session that cannot be read (nil: readable).
func (f *fakeExecutor) SetUnread(id peer.Key, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unread[id] = err
}

// Written is the peer's list as written.
func (f *fakeExecutor) Written(id peer.Key) []tcpao.KeyInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.written[id])
}

// LastSubmit is the last batch of plans submitted.
func (f *fakeExecutor) LastSubmit() []ExecPlan {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submits) == 0 {
		return nil
	}
	return f.submits[len(f.submits)-1]
}

// Reads is how many times Observe read the peer.
func (f *fakeExecutor) Reads(id peer.Key) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[id]
}

// HoldObserve holds the next Observe (a pass's read of every peer under
// way) until the returned function is called or its context ends;
// ObserveHeld reports whether one is held now.
func (f *fakeExecutor) HoldObserve() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observeGate = make(chan struct{})
	g := f.observeGate
	return sync.OnceFunc(func() { close(g) })
}

func (f *fakeExecutor) ObserveHeld() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.observeHeld
}

func (f *fakeExecutor) Observe(ctx context.Context, peers []peer.Key) map[peer.Key]ExecObserved {
	f.mu.Lock()
	if g := f.observeGate; g != nil {
		f.observeGate = nil
		f.observeHeld++
		f.mu.Unlock()
		select {
		case <-g:
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.observeHeld--
	}
	defer f.mu.Unlock()
	out := map[peer.Key]ExecObserved{}
	if f.reads == nil {
		f.reads = map[peer.Key]int{}
	}
	for _, id := range peers {
		f.reads[id]++
		w := slices.Clone(f.written[id])
		ob := ExecObserved{Written: rotator.Observed{HaveAO: len(w) > 0, Keys: w}, Unread: f.unread[id], Where: "fake " + id.String() + ".list"}
		if s := f.session[id]; s != nil && ob.Unread == nil {
			c := *s
			c.Keys = slices.Clone(s.Keys)
			ob.Session = &c
		}
		out[id] = ob
	}
	return out
}

// SubmittedSince is every plan of the Submit calls after the first n.
func (f *fakeExecutor) SubmittedSince(n int) []ExecPlan {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ExecPlan
	for _, pls := range f.submits[min(n, len(f.submits)):] {
		out = append(out, pls...)
	}
	return out
}

// Submits is how many times Submit was called.
func (f *fakeExecutor) Submits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.submits)
}

func (f *fakeExecutor) Submit(plans []ExecPlan) {
	f.mu.Lock()
	f.submits = append(f.submits, plans)
	out := ExecOutcome{}
	for _, pl := range plans {
		f.written[pl.Peer] = applyFakePlan(f.written[pl.Peer], pl)
		out.Gen = max(out.Gen, pl.Gen)
		if s := f.session[pl.Peer]; s != nil {
			// The speaker's reconfigure takes the keys the list dropped
			// off its sockets.
			c := *s
			c.Keys = slices.DeleteFunc(slices.Clone(s.Keys), func(k tcpao.KeyInfo) bool {
				return !slices.ContainsFunc(f.written[pl.Peer], func(w tcpao.KeyInfo) bool { return execIDOf(w.KeyRef) == execIDOf(k.KeyRef) })
			})
			f.session[pl.Peer] = &c
		}
	}
	done, hold := f.done, f.hold
	f.mu.Unlock()
	if done == nil {
		return
	}
	if hold != nil && slices.ContainsFunc(plans, func(pl ExecPlan) bool { return pl.Revoke }) {
		go func() {
			<-hold
			done(out)
		}()
		return
	}
	done(out)
}

func (f *fakeExecutor) Clean(_ context.Context, peers []peer.Key, ref tcpao.KeyRef) (map[peer.Key]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	holds := func(ks []tcpao.KeyInfo) bool {
		return slices.ContainsFunc(ks, func(k tcpao.KeyInfo) bool { return execIDOf(k.KeyRef) == execIDOf(ref) })
	}
	dirty := map[peer.Key]bool{}
	for _, id := range peers {
		if holds(f.written[id]) || f.session[id] != nil && holds(f.session[id].Keys) {
			dirty[id] = true
		}
	}
	return dirty, nil
}

func (f *fakeExecutor) Run(ctx context.Context, done func(ExecOutcome)) error {
	f.mu.Lock()
	f.done = done
	f.mu.Unlock()
	<-ctx.Done()
	return nil
}

// applyFakePlan is the list pl leaves of written (ExecPlan.List, every
// executor's rule): added keys with the plan's material, the others with
// their written one.
func applyFakePlan(written []tcpao.KeyInfo, pl ExecPlan) []tcpao.KeyInfo {
	l, err := pl.List(written)
	switch {
	case err != nil:
		return written
	case l.Disabled:
		return nil
	}
	var out []tcpao.KeyInfo
	for _, k := range l.Keys {
		ki := tcpao.KeyInfo{KeyRef: k.Ref, IsCurrent: k.Preferred, IsRNext: k.Preferred}
		if k.Added {
			m := pl.Keys[k.Desired].MKT
			ki.Algorithm, ki.Fingerprint = m.Algorithm, m.Secret.Fingerprint()
		} else if i := slices.IndexFunc(written, func(w tcpao.KeyInfo) bool { return execIDOf(w.KeyRef) == execIDOf(k.Ref) }); i >= 0 {
			ki.Algorithm, ki.Fingerprint = written[i].Algorithm, written[i].Fingerprint
		}
		out = append(out, ki)
	}
	return out
}

// NewFakeExecutor is newFakeExecutor, for the package's external tests.
var NewFakeExecutor = newFakeExecutor
