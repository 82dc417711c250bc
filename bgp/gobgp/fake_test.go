package gobgp

import (
	"context"
	"io"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fakeAPI implements API in memory: ListPeer returns peers; each WatchEvent
// call takes the next scripted stream (a channel of events; closing it ends
// the stream with an error).
type fakeAPI struct {
	mu       sync.Mutex
	peers    []*api.Peer
	streams  []chan *api.WatchEventResponse
	watches  int
	watchAt  []time.Time // each WatchEvent call, on the bubble's clock
	lists    int
	resets   []*api.ResetPeerRequest
	listErr  error
	watchErr error
}

func (f *fakeAPI) setPeers(p ...*api.Peer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = p
}

func (f *fakeAPI) ListPeer(ctx context.Context, _ *api.ListPeerRequest, _ ...grpc.CallOption) (api.GobgpApi_ListPeerClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return &listStream{ctx: ctx, peers: append([]*api.Peer(nil), f.peers...)}, nil
}

func (f *fakeAPI) WatchEvent(ctx context.Context, _ *api.WatchEventRequest, _ ...grpc.CallOption) (api.GobgpApi_WatchEventClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches++
	f.watchAt = append(f.watchAt, time.Now())
	if f.watchErr != nil {
		return nil, f.watchErr
	}
	if len(f.streams) == 0 {
		return &watchStream{ctx: ctx}, nil // blocks until ctx ends
	}
	ch := f.streams[0]
	f.streams = f.streams[1:]
	return &watchStream{ctx: ctx, ch: ch}, nil
}

func (f *fakeAPI) ResetPeer(_ context.Context, r *api.ResetPeerRequest, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, r)
	return &emptypb.Empty{}, nil
}

// backoffs are the times between successive WatchEvent calls: in a
// synctest bubble, where no time passes while the test runs an attempt,
// exactly the watch's reconnect delays.
func (f *fakeAPI) backoffs() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(f.watchAt); i++ {
		out = append(out, f.watchAt[i].Sub(f.watchAt[i-1]))
	}
	return out
}

type listStream struct {
	grpc.ClientStream
	ctx   context.Context
	peers []*api.Peer
}

func (s *listStream) Recv() (*api.ListPeerResponse, error) {
	if len(s.peers) == 0 {
		return nil, io.EOF
	}
	p := s.peers[0]
	s.peers = s.peers[1:]
	return &api.ListPeerResponse{Peer: p}, nil
}

type watchStream struct {
	grpc.ClientStream
	ctx context.Context
	ch  chan *api.WatchEventResponse
}

func (s *watchStream) Recv() (*api.WatchEventResponse, error) {
	select {
	case r, ok := <-s.ch:
		if !ok {
			return nil, io.ErrUnexpectedEOF
		}
		return r, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}
