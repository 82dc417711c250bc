package gobgp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	apiv4 "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/speakers"
)

// API is the part of GoBGP's gRPC API this package calls.
type API interface {
	ListPeer(ctx context.Context, in *api.ListPeerRequest, opts ...grpc.CallOption) (api.GobgpApi_ListPeerClient, error)
	WatchEvent(ctx context.Context, in *api.WatchEventRequest, opts ...grpc.CallOption) (api.GobgpApi_WatchEventClient, error)
	ResetPeer(ctx context.Context, in *api.ResetPeerRequest, opts ...grpc.CallOption) (*emptypb.Empty, error)
}

var _ API = api.GobgpApiClient(nil)

// Options configure a Speaker.
type Options struct {
	// Name describes the speaker in logs ("gobgpd unix:///run/gobgpd.sock").
	Name string
	// PID returns gobgpd's process id. Default: the owner of the TCP
	// listener on port 179 in aokeyd's network namespace.
	PID func(ctx context.Context) (int, error)
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the watch's reconnect delay
	// (defaults 200ms and 30s); it doubles after each failure and resets
	// after a stream delivered an event.
	MinBackoff, MaxBackoff time.Duration
	// API is the API line: APIv3, APIv4 or APIAuto ("", detected at the
	// first call that reaches gobgpd). Dial only.
	API string
	// OnRPC, when set, is called once for every gRPC call the Speaker
	// makes, with its method name (ListPeer, WatchEvent, ResetPeer): the
	// daemon counts them as a metric. It must not block.
	OnRPC func(method string)
}

// The API lines (Options.API).
const (
	APIAuto = ""
	APIv3   = "v3"
	APIv4   = "v4"
)

// The gRPC methods the Speaker calls, as OnRPC and RPCs name them.
const (
	MethodListPeer   = "ListPeer"
	MethodWatchEvent = "WatchEvent"
	MethodResetPeer  = "ResetPeer"
)

// Indexes into methods (and Speaker.rpcs).
const (
	rpcListPeer = iota
	rpcWatchEvent
	rpcResetPeer
)

var methods = [...]string{rpcListPeer: MethodListPeer, rpcWatchEvent: MethodWatchEvent, rpcResetPeer: MethodResetPeer}

// Speaker is gobgpd seen through its gRPC API, v3 or v4 (backend).
type Speaker struct {
	b    backend
	opt  Options
	rpcs [len(methods)]atomic.Uint64
}

// backend is one line of GoBGP's API, converted to the speaker-neutral
// types: what differs between v3 and v4 (service and message names, enum
// values) stays behind it, and the Speaker's watch, re-list and backoff
// logic is shared. A backend's calls are counted by the Speaker.
type backend interface {
	// listPeer lists address's neighbor ("": every neighbor).
	listPeer(ctx context.Context, address string) ([]bgp.PeerInfo, error)
	// watchPeers opens a stream of peer state events.
	watchPeers(ctx context.Context) (peerStream, error)
	resetPeer(ctx context.Context, address, communication string) error
}

// peerStream yields the neighbors of peer state events. skip is true for
// an event that is not one, or that could not be converted (err says why):
// the caller reads on. Otherwise err ends the stream.
type peerStream interface {
	recv() (p bgp.PeerInfo, skip bool, err error)
}

// rpc counts one call of methods[i].
func (s *Speaker) rpc(i int) {
	s.rpcs[i].Add(1)
	if s.opt.OnRPC != nil {
		s.opt.OnRPC(methods[i])
	}
}

// RPCs returns how many calls of each gRPC method the Speaker made so far.
func (s *Speaker) RPCs() map[string]uint64 {
	out := make(map[string]uint64, len(methods))
	for i, m := range methods {
		out[m] = s.rpcs[i].Load()
	}
	return out
}

var _ bgp.Speaker = (*Speaker)(nil)

// New returns a Speaker using c, gobgpd v3's API.
func New(c API, opt Options) *Speaker { return newSpeaker(v3{c}, opt) }

func newSpeaker(b backend, opt Options) *Speaker {
	if opt.Name == "" {
		opt.Name = "gobgpd"
	}
	if opt.PID == nil {
		opt.PID = func(context.Context) (int, error) { return sockets.ListenerOwner(speakers.Port) }
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = 200 * time.Millisecond
	}
	if opt.MaxBackoff < opt.MinBackoff {
		opt.MaxBackoff = max(30*time.Second, opt.MinBackoff)
	}
	return &Speaker{b: b, opt: opt}
}

// Dial connects to gobgpd's API at target ("unix:///path" or "host:port",
// plaintext as gobgpd serves it without --tls) and returns the Speaker and
// the connection to close. opt.API chooses the API line: APIv3, APIv4, or
// APIAuto (detected at the first call that reaches gobgpd).
func Dial(target string, opt Options) (*Speaker, io.Closer, error) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("gobgpd API %s: %w", target, err)
	}
	if opt.Name == "" {
		opt.Name = "gobgpd " + target
	}
	var b backend
	switch opt.API {
	case APIv3:
		b = v3{api.NewGobgpApiClient(cc)}
	case APIv4:
		b = v4{apiv4.NewGoBgpServiceClient(cc)}
	case APIAuto:
		b = newAuto(api.NewGobgpApiClient(cc), apiv4.NewGoBgpServiceClient(cc), opt.Log)
	default:
		cc.Close()
		return nil, nil, fmt.Errorf("gobgpd API %q: want %q, %q or %q (auto)", opt.API, APIv3, APIv4, APIAuto)
	}
	return newSpeaker(b, opt), cc, nil
}

// Name implements bgp.Speaker.
func (s *Speaker) Name() string { return s.opt.Name }

// PID implements bgp.Speaker.
func (s *Speaker) PID(ctx context.Context) (int, error) { return s.opt.PID(ctx) }

// Peers implements bgp.Speaker with ListPeer.
func (s *Speaker) Peers(ctx context.Context) ([]bgp.PeerInfo, error) {
	return s.listPeer(ctx, "")
}

// Peer implements bgp.Speaker with ListPeer for the neighbor's address
// alone, so that gobgpd sends one peer, not its whole table.
func (s *Speaker) Peer(ctx context.Context, k peer.Key) (bgp.PeerInfo, error) {
	ps, err := s.listPeer(ctx, k.Addr.String())
	if err != nil {
		return bgp.PeerInfo{}, err
	}
	for _, p := range ps {
		if p.Key() == k {
			return p, nil
		}
	}
	return bgp.PeerInfo{}, fmt.Errorf("%s: %w: %s", s.opt.Name, bgp.ErrNoPeer, k)
}

// listPeer calls ListPeer for address ("": every neighbor).
func (s *Speaker) listPeer(ctx context.Context, address string) ([]bgp.PeerInfo, error) {
	s.rpc(rpcListPeer)
	ps, err := s.b.listPeer(ctx, address)
	if err != nil {
		return nil, fmt.Errorf("%s ListPeer: %w", s.opt.Name, err)
	}
	return ps, nil
}

// ResetPeer implements bgp.Speaker (a hard reset with a Cease
// communication).
// gobgpd keys its neighbors by address alone, so k.VRF is not asked for:
// config refuses one address bound in two VRFs with gobgpd (its registry
// entry does not separate VRFs; policy.CheckSpeaker).
func (s *Speaker) ResetPeer(ctx context.Context, k peer.Key, reason string) error {
	s.rpc(rpcResetPeer)
	if err := s.b.resetPeer(ctx, k.Addr.String(), reason); err != nil {
		return fmt.Errorf("%s ResetPeer %s: %w", s.opt.Name, k, err)
	}
	return nil
}

// Watch implements bgp.Speaker: WatchEvent(peer) with reconnect and
// re-list.
func (s *Speaker) Watch(ctx context.Context) (<-chan bgp.Event, error) {
	ch := make(chan bgp.Event, 16)
	go s.watch(ctx, ch)
	return ch, nil
}

func (s *Speaker) watch(ctx context.Context, ch chan<- bgp.Event) {
	defer close(ch)
	delay := s.opt.MinBackoff
	for ctx.Err() == nil {
		delivered, err := s.watchOnce(ctx, ch)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			delay = s.opt.MinBackoff
			// Events may be missed until the next sync.
			if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventLost}) {
				return
			}
		}
		s.opt.Log.Warn("gobgpd watch stream ended; reconnecting", "speaker", s.opt.Name, "err", err, "backoff", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, s.opt.MaxBackoff)
	}
}

// The watch's listings after the first (watchOnce). GoBGP's WatchEvent
// sends no initial state, and gobgpd registers the watcher only after the
// client's stream has opened: a change between the first listing and that
// registration is in neither, and a session established then would never
// be reported (seen in the guest: both sides' active opens, B's session
// never taken over). A second listing once the watcher is surely
// registered closes that window; a listing now and then after it is a
// safety net for anything else a stream loses (one ListPeer a minute).
const (
	relistFirst = 2 * time.Second
	relistEvery = time.Minute
)

// peerRecv is one read of the event stream.
type peerRecv struct {
	p    bgp.PeerInfo
	skip bool
	err  error
}

// watchOnce opens the stream, then lists (so no change after the watcher's
// registration falls between the two), sends the sync and relays events
// until the stream fails, listing again relistFirst after the open and
// every relistEvery after that. Each listing is a sync sent in the
// stream's order: events the stream delivers after it were read after it,
// so the last state relayed is the latest. delivered is true once the
// first sync went out.
func (s *Speaker) watchOnce(ctx context.Context, ch chan<- bgp.Event) (delivered bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.rpc(rpcWatchEvent)
	st, err := s.b.watchPeers(sctx)
	if err != nil {
		return false, fmt.Errorf("WatchEvent: %w", err)
	}
	peers, err := s.Peers(sctx)
	if err != nil {
		return false, err
	}
	if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventSync, Peers: peers}) {
		return true, ctx.Err()
	}
	// The stream is read by its own goroutine (ended with sctx: recv
	// returns once the stream's context is cancelled), so that the
	// listings can interleave with its events.
	recvs := make(chan peerRecv)
	go func() {
		for {
			p, skip, err := st.recv()
			select {
			case recvs <- peerRecv{p, skip, err}:
			case <-sctx.Done():
				return
			}
			if err != nil && !skip {
				return
			}
		}
	}()
	relist := time.NewTimer(relistFirst)
	defer relist.Stop()
	for {
		var r peerRecv
		select {
		case r = <-recvs:
		case <-relist.C:
			peers, err := s.Peers(sctx)
			if err != nil {
				return true, err
			}
			if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventSync, Peers: peers}) {
				return true, ctx.Err()
			}
			relist.Reset(relistEvery)
			continue
		case <-ctx.Done():
			return true, ctx.Err()
		}
		p, skip, err := r.p, r.skip, r.err
		if skip {
			if err != nil {
				s.opt.Log.Warn("gobgpd peer event ignored", "speaker", s.opt.Name, "err", err)
			}
			continue
		}
		if err != nil {
			return true, fmt.Errorf("WatchEvent: %w", err)
		}
		// An event gives no timers or flop count (GoBGP's WatchEvent
		// fills Conf, State's session fields and Transport only).
		p.Partial = true
		if !bgp.SendEvent(ctx, ch, bgp.Event{Kind: bgp.EventState, Peer: p}) {
			return true, ctx.Err()
		}
	}
}
