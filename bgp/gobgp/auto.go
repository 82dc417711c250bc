package gobgp

import (
	"context"
	"log/slog"
	"sync"

	api "github.com/osrg/gobgp/v3/api"
	apiv4 "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aokeyd/aokeyd/bgp"
)

// auto detects gobgpd's API line at the first call that reaches it: v4's
// GetBgp answered is v4; Unimplemented (a v3 server does not know the
// service api.GoBgpService) is v3. A call that does not reach gobgpd
// decides nothing and is tried again with the next call (gobgpd may start
// after aokeyd; a restarted gobgpd may be another version, which the
// watch's reconnect then detects again through resetLine).
type auto struct {
	v3  v3
	v4  v4
	get func(ctx context.Context) error // v4's GetBgp
	log *slog.Logger

	mu   sync.Mutex
	line backend // nil until detected
}

func newAuto(c3 api.GobgpApiClient, c4 apiv4.GoBgpServiceClient, log *slog.Logger) *auto {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &auto{v3: v3{c3}, v4: v4{c4}, log: log, get: func(ctx context.Context) error {
		_, err := c4.GetBgp(ctx, &apiv4.GetBgpRequest{})
		return err
	}}
}

// backend is the detected line, detecting it first when needed.
func (a *auto) backend(ctx context.Context) (backend, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.line != nil {
		return a.line, nil
	}
	err := a.get(ctx)
	switch {
	case err == nil:
		a.line = a.v4
		a.log.Info("gobgpd speaks API v4")
	case status.Code(err) == codes.Unimplemented:
		a.line = a.v3
		a.log.Info("gobgpd speaks API v3")
	default:
		return nil, err
	}
	return a.line, nil
}

// resetLine forgets the detected line: the next call detects it again.
func (a *auto) resetLine() {
	a.mu.Lock()
	a.line = nil
	a.mu.Unlock()
}

func (a *auto) listPeer(ctx context.Context, address string) ([]bgp.PeerInfo, error) {
	b, err := a.backend(ctx)
	if err != nil {
		return nil, err
	}
	return b.listPeer(ctx, address)
}

func (a *auto) resetPeer(ctx context.Context, address, communication string) error {
	b, err := a.backend(ctx)
	if err != nil {
		return err
	}
	return b.resetPeer(ctx, address, communication)
}

// watchPeers detects the line anew for each stream: a stream ends when
// gobgpd restarts, perhaps as another version.
func (a *auto) watchPeers(ctx context.Context) (peerStream, error) {
	a.resetLine()
	b, err := a.backend(ctx)
	if err != nil {
		return nil, err
	}
	return b.watchPeers(ctx)
}
