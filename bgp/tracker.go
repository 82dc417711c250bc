package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/speakers"
)

// Discoverer finds and lends the speaker's sockets; sockets.System
// implements it on Linux.
type Discoverer interface {
	Listeners(pid int, port uint16) ([]sockets.Ref, error)
	Established(pid int, local, remote netip.AddrPort) (sockets.Ref, error)
	Connections(pid int, neighbor netip.Addr) ([]sockets.Ref, error)
	With(ref sockets.Ref, fn func(fd int) error) error
}

// ListenerLister is what a Discoverer may also offer: the inodes, sorted,
// of every listening TCP socket on port in the network namespace of
// process pid (0: the caller's own), whoever holds them, listed cheaply
// enough to poll every second (sockets.System: one sock_diag dump). A
// change in that set is a listener that may have no keys yet (a speaker
// restarted, or its BGP instance configured after it started).
type ListenerLister interface {
	ListenerInodes(pid int, port uint16) ([]uint64, error)
}

var _ ListenerLister = sockets.System{}

// ConnectionsLister is what a Discoverer may also offer: process pid's
// established connections to any of neighbors (unmapped addresses), in
// one listing (sockets.System: one sock_diag dump and one search of the
// process's descriptors). A sync of the speaker's full peer list finds
// every session with it: one Established or Connections call per peer
// was a dump and a descriptor search each, O(N^2) a sync: 20 of aokeyd's
// 118 CPU-seconds over a 1,024-peer roll in the guest, with the watch
// listing again every minute.
type ConnectionsLister interface {
	ConnectionsTo(pid int, neighbors map[netip.Addr]bool) (map[netip.Addr][]sockets.Ref, error)
}

var _ ConnectionsLister = sockets.System{}

// SocketHandle is one of the speaker's sockets, lent out one call at a
// time. Do duplicates the descriptor, runs fn and closes the duplicate;
// fn must not keep fd. tcpao.FromFD(fd) gives the TCP-AO surface of it.
type SocketHandle interface {
	Ref() sockets.Ref
	Do(fn func(fd int) error) error
}

// SessionObserver follows the managed peers' sessions (aokeyd's daemon
// implements it and runs each session's rotation).
type SessionObserver interface {
	// Both are called from the Tracker's event loop: return quickly.
	//
	// OnEstablished: peer's session is up on the connection sock (an
	// accepted one, or with ActiveOpens one the speaker opened). The observer verifies the socket's keys against the desired
	// set (the del_async race: a key just deleted from the listener may
	// have been copied to it) and starts the peer's rotation.
	OnEstablished(ctx context.Context, peer PeerInfo, sock SocketHandle)
	// OnDown: peer's session is gone; stop touching its socket.
	OnDown(ctx context.Context, peer PeerInfo)
}

// TrackerOptions configure a Tracker.
type TrackerOptions struct {
	// ListenPort is the speaker's BGP port (default speakers.Port). A
	// session whose local port is another one was opened by the speaker
	// (active) and carries no TCP-AO keys: it is logged, not handed to
	// the observer -- unless ActiveOpens is set.
	ListenPort uint16
	// ActiveOpens: the speaker's outgoing connections carry TCP-AO keys
	// (it runs under `aokeyd exec`, which keys each connect()), so its
	// active sessions are handed to the observer like accepted ones.
	ActiveOpens bool
	// Managed selects the neighbors to follow (nil: all).
	Managed func(PeerInfo) bool
	// Synced, when set, is called after each full peer list from the
	// speaker (its first one and each one after a reconnect, e.g. a
	// restarted speaker whose new listening socket needs its keys before
	// any session can come up).
	Synced func()
	// LinksChanged, when set, is called when an interface neighbour's
	// learned address appears, changes or goes (LinkPeers): the listener
	// is keyed for it before its session comes up. It must not block.
	LinksChanged func()
	// PendingWait bounds how long Peer waits, when it cannot vouch for a
	// session only because events are being applied, for the events
	// pending when it was asked before it asks the speaker
	// (DefaultPendingWait when 0; negative: never wait).
	PendingWait time.Duration
	Log         *slog.Logger
}

// DefaultPendingWait is TrackerOptions.PendingWait's default: the guard's
// question then still has most of its DefaultQueryTimeout for the speaker.
const DefaultPendingWait = time.Second

// Tracker turns the speaker's session events into SessionObserver calls,
// with the socket of each Established session.
type Tracker struct {
	sp   Speaker
	disc Discoverer
	obs  SessionObserver
	opt  TrackerOptions

	hits, misses atomic.Uint64
	links        linkTable // every interface neighbour's last report (links.go)

	mu sync.Mutex
	up map[peer.Key]*tracked // by the session's peer: the same address in two VRFs is two
	// live: the event stream is synced and every event it delivered has
	// been applied, so the sessions in up are the speaker's as of its last
	// event (see Peer). gen counts the syncs.
	live bool
	gen  uint64
	// busy counts events taken from the stream and not yet applied; ch is
	// the stream (its buffered, unread events also keep Peer from
	// answering from up).
	busy int
	ch   <-chan Event
	// recv and applied count the events taken from the stream and those
	// applied (recv-applied == busy); appliedCh is closed, and replaced,
	// when one more was applied.
	recv, applied uint64
	appliedCh     chan struct{}

	// listed is a sync's one listing of the speaker's connections, by
	// neighbor (ConnectionsLister), for find; nil outside a sync. The
	// tracker's goroutine's alone.
	listed    map[netip.Addr][]sockets.Ref
	listedPID int
	// lost: Established sessions whose socket was not found, looked for
	// again (see update). Only Run's loop touches it.
	lost map[peer.Key]lostSession
}

type tracked struct {
	// peer is the session's first report, never written once stored: the
	// session's handle points to it (SessionInfo), and the observer may
	// keep that rather than a copy. gen alone changes (under t.mu).
	peer PeerInfo
	ref  sockets.Ref
	gen  uint64 // the sync this session was last confirmed in
}

// NewTracker returns a Tracker; call Run.
func NewTracker(sp Speaker, disc Discoverer, obs SessionObserver, opt TrackerOptions) *Tracker {
	if opt.ListenPort == 0 {
		opt.ListenPort = speakers.Port
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.PendingWait == 0 {
		opt.PendingWait = DefaultPendingWait
	}
	return &Tracker{sp: sp, disc: disc, obs: obs, opt: opt, up: map[peer.Key]*tracked{}, appliedCh: make(chan struct{}), lost: map[peer.Key]lostSession{}}
}

// Run follows the speaker until ctx ends.
func (t *Tracker) Run(ctx context.Context) error {
	ch, err := t.sp.Watch(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", t.sp.Name(), err)
	}
	t.mu.Lock()
	t.ch = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.live, t.ch = false, nil
		t.mu.Unlock()
	}()
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	for {
		var ev Event
		select {
		case e, ok := <-ch:
			if !ok {
				return ctx.Err()
			}
			ev = e
		case <-retry.C:
			t.retryLost(ctx)
			t.armRetry(retry)
			continue
		}
		t.mu.Lock()
		t.busy++
		t.recv++
		t.mu.Unlock()
		switch ev.Kind {
		case EventSync:
			t.linksNoted(t.links.sync(ev.Peers))
			t.sync(ctx, ev.Peers)
		case EventState:
			t.linksNoted(t.links.note(ev.Peer))
			t.update(ctx, ev.Peer)
		case EventLost:
			t.mu.Lock()
			t.live = false
			t.mu.Unlock()
		}
		t.mu.Lock()
		t.busy--
		t.applied++
		close(t.appliedCh)
		t.appliedCh = make(chan struct{})
		t.mu.Unlock()
		t.armRetry(retry)
	}
}

// Retry delays of a session whose socket was not found: from the first to
// the last, doubling, and the last kept for as long as the speaker still
// reports the session in that state.
const (
	firstRetry = 250 * time.Millisecond
	lastRetry  = 8 * time.Second
)

// lostSession is an Established session whose socket was not found: looked
// for again at next (the loop's own; a state change for the peer drops it).
type lostSession struct {
	peer  PeerInfo
	next  time.Time
	delay time.Duration
	tries int
}

// armRetry sets the timer to the earliest lost session's next look.
func (t *Tracker) armRetry(timer *time.Timer) {
	var first time.Time
	for _, l := range t.lost {
		if first.IsZero() || l.next.Before(first) {
			first = l.next
		}
	}
	timer.Stop()
	if !first.IsZero() {
		timer.Reset(max(0, time.Until(first)))
	}
}

// retryLost looks again for the sockets of the lost sessions that are due.
func (t *Tracker) retryLost(ctx context.Context) {
	now := time.Now()
	var due []PeerInfo
	for _, l := range t.lost {
		if !l.next.After(now) {
			due = append(due, l.peer)
		}
	}
	for _, p := range due {
		t.update(ctx, p)
	}
}

// Peer implements PeerQuerier for the session guard: k's session
// as the speaker's event stream last reported it, without asking the
// speaker, when the tracker can vouch for it -- the stream is synced and
// has not broken since, every event it delivered has been applied, and the
// session was confirmed by the stream's last sync or an event after it.
// Otherwise (a neighbor it does not hold as Established, a stream that is
// down, resyncing or has events pending) it asks the speaker about that
// neighbor alone. A session that drops is taken out of the cache by its
// event, so the guard's next question goes to the speaker and sees it.
//
// When it cannot vouch only because events are pending (the stream is
// live and holds the session, but the loop is applying events or has
// some queued), Peer first waits, up to PendingWait, until the events
// pending when it was asked are applied, and answers from the sessions
// then held: what the stream said up to the question, as a quiet stream's
// cache would. Under load the loop lags behind the stream, and every
// peer's guard asking the speaker at once is what overloads it.
func (t *Tracker) Peer(ctx context.Context, k peer.Key) (PeerInfo, error) {
	if p, ok := t.CachedPeer(k); ok {
		return p, nil
	}
	if p, ok := t.afterPending(ctx, k); ok {
		t.hits.Add(1)
		return p, nil
	}
	t.misses.Add(1)
	return t.sp.Peer(ctx, k)
}

// afterPending waits until the events pending now are applied (at most
// PendingWait, and not past ctx) and then answers for k from the
// sessions held, if the stream is live and holds it. ok false: ask the
// speaker.
func (t *Tracker) afterPending(ctx context.Context, k peer.Key) (PeerInfo, bool) {
	if t.opt.PendingWait < 0 {
		return PeerInfo{}, false
	}
	t.mu.Lock()
	if t.ch == nil || !t.live || t.busy == 0 && len(t.ch) == 0 {
		// Nothing pending: a miss for another reason.
		t.mu.Unlock()
		return PeerInfo{}, false
	}
	if _, ok := t.up[k]; !ok {
		t.mu.Unlock()
		return PeerInfo{}, false
	}
	target := t.recv + uint64(len(t.ch))
	t.mu.Unlock()
	timer := time.NewTimer(t.opt.PendingWait)
	defer timer.Stop()
	for {
		t.mu.Lock()
		if t.applied >= target {
			p, held := t.heldLocked(k)
			t.mu.Unlock()
			return p, held
		}
		wake := t.appliedCh
		t.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return PeerInfo{}, false
		case <-ctx.Done():
			return PeerInfo{}, false
		}
	}
}

// CachedPeer implements PeerCache: Peer's answer when it comes from the
// followed session state (ok false: Peer would ask the speaker).
func (t *Tracker) CachedPeer(k peer.Key) (PeerInfo, bool) {
	t.mu.Lock()
	p, held := t.heldLocked(k)
	vouch := held && t.busy == 0 && len(t.ch) == 0
	t.mu.Unlock()
	if !vouch {
		return PeerInfo{}, false
	}
	t.hits.Add(1)
	return p, true
}

// heldLocked is k's session as the events applied so far hold it, ok
// when the stream is live and its last sync, or an event after it,
// confirmed the session. t.mu is held.
func (t *Tracker) heldLocked(k peer.Key) (PeerInfo, bool) {
	tr, ok := t.up[k]
	if !ok {
		return PeerInfo{}, false
	}
	return tr.peer, t.live && t.ch != nil && tr.gen == t.gen
}

// CacheStats reports how many of Peer's answers came from the followed
// session state (hits) and how many asked the speaker (misses).
func (t *Tracker) CacheStats() (hits, misses uint64) { return t.hits.Load(), t.misses.Load() }

// Listeners returns handles to the speaker's listening sockets on the BGP
// port, where the rotator installs the keys accepted connections inherit.
func (t *Tracker) Listeners(ctx context.Context) ([]SocketHandle, error) {
	pid, err := t.sp.PID(ctx)
	if err != nil {
		return nil, fmt.Errorf("pid of %s: %w", t.sp.Name(), err)
	}
	refs, err := t.disc.Listeners(pid, t.opt.ListenPort)
	if err != nil {
		return nil, fmt.Errorf("listeners of %s (pid %d): %w", t.sp.Name(), pid, err)
	}
	out := make([]SocketHandle, len(refs))
	for i, r := range refs {
		out[i] = &handle{t: t, ref: r}
	}
	return out, nil
}

func (t *Tracker) managed(p PeerInfo) bool { return t.opt.Managed == nil || t.opt.Managed(p) }

func (t *Tracker) sync(ctx context.Context, peers []PeerInfo) {
	t.mu.Lock()
	t.gen++
	t.live = false
	t.mu.Unlock()
	t.listAll(ctx, peers)
	seen := map[peer.Key]bool{}
	for _, p := range peers {
		seen[p.Key()] = true
		t.update(ctx, p)
	}
	t.listed = nil
	for k := range t.lost {
		if !seen[k] {
			delete(t.lost, k)
		}
	}
	t.mu.Lock()
	var gone []PeerInfo
	for a, tr := range t.up {
		if !seen[a] {
			gone = append(gone, tr.peer)
			delete(t.up, a)
		}
	}
	t.mu.Unlock()
	for _, p := range gone {
		t.obs.OnDown(ctx, p)
	}
	t.mu.Lock()
	t.live = true
	t.mu.Unlock()
	if t.opt.Synced != nil {
		t.opt.Synced()
	}
}

// update applies the speaker's report of one peer. An Established
// session whose socket is not found (a listing without live ports while a
// connection collision leaves two connections to the neighbor, a report
// racing its connection) is kept in lost and looked for again with backoff
// until found or until the speaker reports the peer otherwise: a stable
// session sends no further event, and one left without its socket would
// get no keys from aokeyd for its lifetime.
func (t *Tracker) update(ctx context.Context, p PeerInfo) {
	k := p.Key()
	lost, wasLost := t.lost[k]
	delete(t.lost, k) // put back below while its socket is not found
	if !t.managed(p) {
		// Its events are not followed while it is not managed: what is
		// held for it cannot be vouched for until a sync confirms it.
		t.mu.Lock()
		if tr, ok := t.up[k]; ok {
			tr.gen = 0
		}
		t.mu.Unlock()
		return
	}
	t.mu.Lock()
	cur, isUp := t.up[k]
	t.mu.Unlock()
	if !p.Established() {
		if isUp {
			t.mu.Lock()
			delete(t.up, k)
			t.mu.Unlock()
			t.obs.OnDown(ctx, p)
		}
		return
	}
	ref, err := t.find(ctx, p)
	if err != nil {
		l, again := lost, wasLost
		if !again || l.peer != p { // news from the speaker: start over
			l = lostSession{peer: p, delay: firstRetry}
		} else {
			l.delay = min(2*l.delay, lastRetry)
		}
		l.tries++
		l.next = time.Now().Add(l.delay)
		t.lost[k] = l
		if l.tries == 1 {
			t.opt.Log.Warn("bgp session established but its socket was not found; looking again", "peer", p, "err", err, "retry", l.delay)
		} else {
			t.opt.Log.Debug("bgp session's socket still not found", "peer", p, "err", err, "tries", l.tries, "retry", l.delay)
		}
		// Whatever connection is held for the neighbor may no longer be
		// its session: the guard must ask the speaker.
		t.mu.Lock()
		if tr, ok := t.up[k]; ok {
			tr.gen = 0
		}
		t.mu.Unlock()
		return
	}
	if isUp && cur.ref.Inode == ref.Inode && cur.ref.PID == ref.PID {
		// The same connection, already handed over: confirmed as of now
		// (its first report stays what the guard compares with).
		t.mu.Lock()
		if tr, ok := t.up[k]; ok && tr.ref.Inode == ref.Inode {
			tr.gen = t.gen
		}
		t.mu.Unlock()
		return
	}
	if isUp {
		t.obs.OnDown(ctx, cur.peer)
	}
	if ref.Local.Port() != t.opt.ListenPort && !t.opt.ActiveOpens {
		t.opt.Log.Warn("bgp session was opened by the speaker (not passive): no TCP-AO keys on it", "peer", p, "local", ref.Local)
		t.mu.Lock()
		delete(t.up, k)
		t.mu.Unlock()
		return
	}
	// The connection's ports are the socket's, so that the guard tells
	// this connection from any later one even when the speaker's report
	// leaves them out.
	if p.LocalPort == 0 || p.RemotePort == 0 {
		p.LocalPort, p.RemotePort = ref.Local.Port(), ref.Remote.Port()
	}
	tr := &tracked{peer: p, ref: ref}
	t.mu.Lock()
	tr.gen = t.gen
	t.up[k] = tr
	t.mu.Unlock()
	t.obs.OnEstablished(ctx, p, &handle{t: t, ref: ref, info: &tr.peer})
}

// listAll lists, for a sync of peers, every connection of the speaker to
// their Established managed neighbors at once (ConnectionsLister), for
// find; without it, or when the listing fails, find asks per peer.
func (t *Tracker) listAll(ctx context.Context, peers []PeerInfo) {
	t.listed = nil
	cl, ok := t.disc.(ConnectionsLister)
	if !ok {
		return
	}
	want := map[netip.Addr]bool{}
	for _, p := range peers {
		if p.Established() && p.Neighbor.IsValid() && t.managed(p) {
			want[p.Neighbor.Unmap().WithZone("")] = true
		}
	}
	if len(want) < 2 {
		return // one lookup costs what the listing does
	}
	pid, err := t.sp.PID(ctx)
	if err != nil {
		return
	}
	if m, err := cl.ConnectionsTo(pid, want); err == nil {
		t.listed, t.listedPID = m, pid
	}
}

// find locates the socket of an Established session: by exact 4-tuple when
// the ports are known, else among the connections to the neighbor; in a
// sync, from its one listing (listAll).
func (t *Tracker) find(ctx context.Context, p PeerInfo) (sockets.Ref, error) {
	pid, err := t.sp.PID(ctx)
	if err != nil {
		return sockets.Ref{}, fmt.Errorf("pid of %s: %w", t.sp.Name(), err)
	}
	exact := p.LocalPort != 0 && p.RemotePort != 0 && p.Local.IsValid()
	var refs []sockets.Ref
	switch {
	case t.listed != nil && pid == t.listedPID:
		refs = t.listed[p.Neighbor.Unmap().WithZone("")]
		if exact {
			for _, r := range refs {
				if r.Local.Addr().Unmap() == p.Local.Unmap() && r.Local.Port() == p.LocalPort && r.Remote.Port() == p.RemotePort {
					return r, nil
				}
			}
			return sockets.Ref{}, fmt.Errorf("socket %s<->%s in pid %d: %w", p.LocalAddrPort(), p.RemoteAddrPort(), pid, sockets.ErrNotFound)
		}
	case exact:
		return t.disc.Established(pid, p.LocalAddrPort(), p.RemoteAddrPort())
	default:
		refs, err = t.disc.Connections(pid, p.Neighbor)
		if err != nil {
			return sockets.Ref{}, err
		}
	}
	var match []sockets.Ref
	for _, r := range refs {
		if (p.RemotePort == 0 || r.Remote.Port() == p.RemotePort) && (p.LocalPort == 0 || r.Local.Port() == p.LocalPort) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return sockets.Ref{}, fmt.Errorf("no connection to %s in pid %d: %w", p.Neighbor, pid, sockets.ErrNotFound)
	}
	return sockets.Ref{}, fmt.Errorf("%d connections to %s in pid %d, ports unknown", len(match), p.Neighbor, pid)
}

type handle struct {
	t    *Tracker
	mu   sync.Mutex // serialises Do and guards ref
	ref  sockets.Ref
	info *PeerInfo // the tracker's report of the session (tracked.peer), read-only; nil for Listeners' handles
}

// SessionInfo is the report of h's session as the Tracker that handed h
// to OnEstablished holds it: the same PeerInfo as OnEstablished's, shared,
// so an observer that keeps one per session may keep this one rather than
// a copy (128 bytes a peer). It must not be modified. nil for another
// handle.
func SessionInfo(h SocketHandle) *PeerInfo {
	if h, ok := h.(*handle); ok {
		return h.info
	}
	return nil
}

func (h *handle) Ref() sockets.Ref {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ref
}

// Do lends the socket; when the reference went stale because the speaker
// restarted (new pid) with the same connection, it re-discovers once.
func (h *handle) Do(fn func(fd int) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.t.disc.With(h.ref, fn)
	if !errors.Is(err, sockets.ErrStale) {
		return err
	}
	pid, perr := h.t.sp.PID(context.Background())
	if perr != nil || pid == h.ref.PID {
		return err
	}
	var ref sockets.Ref
	if h.ref.Listening {
		refs, lerr := h.t.disc.Listeners(pid, h.ref.Local.Port())
		for _, r := range refs {
			// Per-VRF listeners share address and port: the bound
			// device tells them apart.
			if r.Local == h.ref.Local && r.BoundDev == h.ref.BoundDev {
				ref = r
			}
		}
		if lerr != nil || ref.Inode == 0 {
			return errors.Join(err, lerr)
		}
	} else {
		var eerr error
		ref, eerr = h.t.disc.Established(pid, h.ref.Local, h.ref.Remote)
		if eerr != nil {
			return errors.Join(err, eerr)
		}
	}
	h.ref = ref
	return h.t.disc.With(ref, fn)
}
