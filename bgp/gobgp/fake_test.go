package gobgp

import (
	"context"
	"io"
	"sync"

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
