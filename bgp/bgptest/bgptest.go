package bgptest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Speaker is a bgp.Speaker whose neighbor table the caller sets: each Watch
// starts with an EventSync of the table, then relays every Set as an
// EventState. A scripted one (NewScriptedSpeaker) delivers only what the
// caller sends.
type Speaker struct {
	name     string
	scripted bool
	// ResetErr, when set, is what ResetPeer returns (the call is recorded
	// either way).
	ResetErr error
	// OnReset, when set, runs at the start of every ResetPeer call (set it
	// before the speaker is in use), e.g. to check what the caller holds.
	OnReset func(k peer.Key)

	mu     sync.Mutex
	pid    int
	peers  map[peer.Key]bgp.PeerInfo
	events chan bgp.Event
	resets []peer.Key
	// queries counts Peers and Peer calls: the questions that cost a real
	// speaker an RPC each (gobgpd: ListPeer).
	queries int
	gate    chan struct{} // non-nil: the next Watch holds its EventSync until closed
}

// NewSpeaker returns a Speaker called name, whose process is pid, with
// peers; buffer is how many Set events may wait for a watcher.
func NewSpeaker(name string, pid, buffer int, peers ...bgp.PeerInfo) *Speaker {
	s := &Speaker{name: name, pid: pid, peers: map[peer.Key]bgp.PeerInfo{}, events: make(chan bgp.Event, buffer)}
	for _, p := range peers {
		s.peers[p.Key()] = p
	}
	return s
}

// NewScriptedSpeaker is NewSpeaker whose Watch hands out the event
// channel itself, for tests of how a consumer follows the stream: no
// EventSync of its own (Send one), and the events Set, Send and Lose queue
// wait in the channel's buffer, where the watcher sees how many are
// pending, as on a real adapter's buffered stream. Close ends the stream;
// the stream is one, so Watch is called once.
func NewScriptedSpeaker(name string, pid, buffer int, peers ...bgp.PeerInfo) *Speaker {
	s := NewSpeaker(name, pid, buffer, peers...)
	s.scripted = true
	return s
}

func (s *Speaker) Name() string { return s.name }

// Peers is the neighbor table, sorted by address.
func (s *Speaker) Peers(context.Context) ([]bgp.PeerInfo, error) {
	s.mu.Lock()
	s.queries++
	s.mu.Unlock()
	return s.list()
}

func (s *Speaker) list() ([]bgp.PeerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]bgp.PeerInfo, 0, len(s.peers))
	for _, p := range s.peers {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b bgp.PeerInfo) int { return a.Key().Compare(b.Key()) })
	return out, nil
}

// Peer is one neighbor of the table; ErrNoPeer when there is none.
func (s *Speaker) Peer(_ context.Context, k peer.Key) (bgp.PeerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	p, ok := s.peers[k]
	if !ok {
		return bgp.PeerInfo{}, fmt.Errorf("%w: %s", bgp.ErrNoPeer, k)
	}
	return p, nil
}

func (s *Speaker) Watch(ctx context.Context) (<-chan bgp.Event, error) {
	if s.scripted {
		return s.events, nil
	}
	s.mu.Lock()
	gate := s.gate
	s.gate = nil
	s.mu.Unlock()
	out := make(chan bgp.Event)
	go func() {
		defer close(out)
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		peers, _ := s.list()
		select {
		case out <- bgp.Event{Kind: bgp.EventSync, Peers: peers}:
		case <-ctx.Done():
			return
		}
		for {
			select {
			case ev := <-s.events:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// ResetPeer records the call and returns ResetErr.
func (s *Speaker) ResetPeer(_ context.Context, k peer.Key, _ string) error {
	if s.OnReset != nil {
		s.OnReset(k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets = append(s.resets, k)
	return s.ResetErr
}

func (s *Speaker) PID(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid, nil
}

// SetPID makes pid the speaker's process from now on: a restarted speaker.
func (s *Speaker) SetPID(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = pid
}

// Send delivers ev to the watcher as it is, leaving the table alone: a
// stream that says what the speaker, asked, would not (yet).
func (s *Speaker) Send(ev bgp.Event) { s.events <- ev }

// Close ends a scripted speaker's stream: its watcher's channel closes.
func (s *Speaker) Close() { close(s.events) }

// HoldSync makes the next Watch deliver its EventSync only once release is
// called.
func (s *Speaker) HoldSync() (release func()) {
	g := make(chan struct{})
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
	return sync.OnceFunc(func() { close(g) })
}

// Set changes a neighbor and tells the watcher.
func (s *Speaker) Set(p bgp.PeerInfo) {
	s.mu.Lock()
	s.peers[p.Key()] = p
	s.mu.Unlock()
	s.events <- bgp.Event{Kind: bgp.EventState, Peer: p}
}

// Queries counts the Peers and Peer calls so far (each one RPC to a real
// speaker; the listing a Watch starts with is not counted).
func (s *Speaker) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// Lose tells the watcher its event stream broke (EventLost): until the
// next Watch's EventSync, nothing known from the stream is vouched for.
func (s *Speaker) Lose() { s.events <- bgp.Event{Kind: bgp.EventLost} }

// Resets lists the peers ResetPeer was called for.
func (s *Speaker) Resets() []peer.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resets)
}

// Discoverer is a bgp.Discoverer over the sockets registered with Add, all
// of process pid.
type Discoverer struct {
	pid int

	mu    sync.Mutex
	next  uint64
	refs  []sockets.Ref
	byTup map[[2]netip.AddrPort]sockets.Ref
	socks map[uint64]tcpao.Socket
	lerr  error // Listeners' answer, when set
	lend  bool  // With lends the registered sockets' fd numbers (LendFDs)
	// singles and listings count the lookups (Lookups).
	singles, listings int
}

var _ bgp.ConnectionsLister = (*Discoverer)(nil)

var _ bgp.ListenerLister = (*Discoverer)(nil)

// FailListeners makes Listeners answer err (nil: the registered listeners
// again), as sockets.Finder answers a *sockets.MPTCPError for a speaker
// whose listener is Multipath TCP.
func (d *Discoverer) FailListeners(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lerr = err
}

// NewDiscoverer returns an empty Discoverer for process pid whose first
// socket gets inode firstInode.
func NewDiscoverer(pid int, firstInode uint64) *Discoverer {
	return &Discoverer{pid: pid, next: firstInode, byTup: map[[2]netip.AddrPort]sockets.Ref{}, socks: map[uint64]tcpao.Socket{}}
}

// Add registers s (a listener when listening, else a connection local to
// remote) and returns its reference; its inode and fd are the next number.
func (d *Discoverer) Add(s tcpao.Socket, local, remote netip.AddrPort, listening bool) sockets.Ref {
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.next
	d.next++
	ref := sockets.Ref{PID: d.pid, Inode: ino, FD: int(ino), Local: local, Remote: remote, Listening: listening}
	d.refs = append(d.refs, ref)
	d.socks[ino] = s
	if !listening {
		d.byTup[[2]netip.AddrPort{local, remote}] = ref
	}
	return ref
}

// Listen marks the socket registered under inode (as a connection with no
// remote: bound, not listening) a listener from now on: the socket a
// listen(2) held by aokeyd exec's supervisor listens on once keyed.
func (d *Discoverer) Listen(inode uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.refs {
		if r.Inode == inode && !r.Listening {
			delete(d.byTup, [2]netip.AddrPort{r.Local, r.Remote})
			d.refs[i].Listening = true
		}
	}
}

// Drop forgets the socket registered under inode: it was closed, and a
// reference to it is stale.
func (d *Discoverer) Drop(inode uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refs = slices.DeleteFunc(d.refs, func(r sockets.Ref) bool {
		if r.Inode == inode && !r.Listening {
			delete(d.byTup, [2]netip.AddrPort{r.Local, r.Remote})
		}
		return r.Inode == inode
	})
	delete(d.socks, inode)
}

// Restart is the speaker's process restarted as pid: every socket
// registered so far is gone, and Add registers pid's from now on.
func (d *Discoverer) Restart(pid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pid = pid
	d.refs = nil
	d.byTup = map[[2]netip.AddrPort]sockets.Ref{}
	d.socks = map[uint64]tcpao.Socket{}
}

// LendFDs makes With lend: it runs fn with the reference's FD -- the
// number Add gave it, not an open descriptor, so fn must not use it as one
// -- while the socket is registered to that process, and answers
// sockets.ErrStale once it is not (dropped, or its process restarted), as
// sockets.System does. For tests of code that holds handles to sockets.
func (d *Discoverer) LendFDs() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lend = true
}

// Socket is the socket registered under inode, nil when there is none.
func (d *Discoverer) Socket(inode uint64) tcpao.Socket {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.socks[inode]
}

func (d *Discoverer) Listeners(pid int, port uint16) ([]sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lerr != nil {
		return nil, d.lerr
	}
	var out []sockets.Ref
	for _, r := range d.refs {
		if r.PID == pid && r.Listening && r.Local.Port() == port {
			out = append(out, r)
		}
	}
	return out, nil
}

// ListenerInodes implements bgp.ListenerLister: the inodes of the
// listeners registered on port, sorted. The Discoverer's sockets are all
// in one namespace, named by its pid or by 0 (the caller's own); another
// pid is a process that is gone.
func (d *Discoverer) ListenerInodes(pid int, port uint16) ([]uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if pid != 0 && pid != d.pid {
		return nil, fmt.Errorf("network namespace of pid %d: %w", pid, sockets.ErrNoProcess)
	}
	var out []uint64
	for _, r := range d.refs {
		if r.Listening && r.Local.Port() == port {
			out = append(out, r.Inode)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d *Discoverer) Established(pid int, local, remote netip.AddrPort) (sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.singles++
	if r, ok := d.byTup[[2]netip.AddrPort{local, remote}]; ok && r.PID == pid {
		return r, nil
	}
	return sockets.Ref{}, fmt.Errorf("%s -> %s: %w", local, remote, sockets.ErrNotFound)
}

// ConnectionsTo is bgp.ConnectionsLister: Connections for every neighbor
// at once.
func (d *Discoverer) ConnectionsTo(pid int, neighbors map[netip.Addr]bool) (map[netip.Addr][]sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listings++
	out := map[netip.Addr][]sockets.Ref{}
	for _, r := range d.refs {
		if a := r.Remote.Addr().Unmap(); r.PID == pid && !r.Listening && neighbors[a] {
			out[a] = append(out[a], r)
		}
	}
	return out, nil
}

// Lookups counts the Established and Connections calls (each a sock_diag
// dump and a descriptor search on a real machine) and the ConnectionsTo
// listings so far.
func (d *Discoverer) Lookups() (single, listings int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.singles, d.listings
}

func (d *Discoverer) Connections(pid int, neighbor netip.Addr) ([]sockets.Ref, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.singles++
	var out []sockets.Ref
	for _, r := range d.refs {
		if r.PID == pid && !r.Listening && r.Remote.Addr() == neighbor {
			out = append(out, r)
		}
	}
	return out, nil
}

// With refuses unless LendFDs was called: the sockets are reached through
// Socket, not descriptors.
func (d *Discoverer) With(ref sockets.Ref, fn func(fd int) error) error {
	d.mu.Lock()
	lend := d.lend
	alive := slices.ContainsFunc(d.refs, func(r sockets.Ref) bool { return r.PID == ref.PID && r.Inode == ref.Inode })
	d.mu.Unlock()
	if !lend {
		return errors.New("bgptest discoverer lends no descriptors: reach its sockets with Socket (daemon.Options.SocketOf)")
	}
	if !alive {
		return fmt.Errorf("%s: %w", ref, sockets.ErrStale)
	}
	return fn(ref.FD)
}
