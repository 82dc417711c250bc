package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend answers from fixed reports and records requests.
type fakeBackend struct {
	mu       sync.Mutex
	status   StatusReport
	rotates  []RotateRequest
	revokes  []RevokeRequest
	replaces []ReplaceRequest
	failAll  error
}

func (f *fakeBackend) Status(_ context.Context, peer string) (StatusReport, error) {
	if f.failAll != nil {
		return StatusReport{}, f.failAll
	}
	if peer == "" {
		return f.status, nil
	}
	r := f.status
	r.Peers = nil
	for _, p := range f.status.Peers {
		if p.Peer == peer {
			r.Peers = append(r.Peers, p)
		}
	}
	if len(r.Peers) == 0 {
		return StatusReport{}, fmt.Errorf("peer %s: %w", peer, ErrNotFound)
	}
	return r, nil
}

func (f *fakeBackend) Plan(context.Context) (PlanReport, error) {
	if f.failAll != nil {
		return PlanReport{}, f.failAll
	}
	return PlanReport{Plan: []string{"peer 192.0.2.2 established ok"}}, nil
}

func (f *fakeBackend) Rotate(_ context.Context, req RotateRequest) (RotateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rotates = append(f.rotates, req)
	return RotateResult{Peers: []RotateOutcome{{Peer: req.Peer, Started: true, State: "announced"}}}, nil
}

func (f *fakeBackend) Revoke(_ context.Context, req RevokeRequest) (RevokeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokes = append(f.revokes, req)
	return RevokeResult{Chain: req.Chain, Key: req.Key, SourceRevoked: true,
		Sockets: []RevokeSocket{{Socket: "peer 192.0.2.2", Action: ActionForcedReplaced, Replacement: "core/b"}},
		Elapsed: Duration(3 * time.Millisecond)}, nil
}

func (f *fakeBackend) Adopt(_ context.Context, req AdoptRequest) (AdoptResult, error) {
	return AdoptResult{Peer: req.Peer, VRF: req.VRF}, nil
}

func (f *fakeBackend) Migrate(_ context.Context, req MigrateRequest) (MigrateResult, error) {
	return MigrateResult{Migrations: []Migration{{Peer: req.Peer, VRF: req.VRF, Step: "prepared"}}}, nil
}

func (f *fakeBackend) Replace(_ context.Context, req ReplaceRequest) (ReplaceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replaces = append(f.replaces, req)
	return ReplaceResult{Chain: req.Chain, Key: req.Key, Sockets: []RevokeSocket{{Socket: "peer 192.0.2.2", Action: ActionReset}}}, nil
}

// serve starts a Server on a fresh socket and returns a client for it.
func serve(t *testing.T, o ServerOptions) (*Client, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "control.sock")
	l, err := Listen(path, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(o)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return NewClient(path, 10*time.Second), path
}

func TestRoundTrip(t *testing.T) {
	fb := &fakeBackend{status: StatusReport{
		KeySource: KeySourceStatus{Name: "file keys.yaml", Stale: true, Age: Duration(time.Hour), LastError: "open: permission denied"},
		Optmem:    Optmem{Limit: 20480, Needed: 40000},
		Peers: []PeerStatus{
			{Peer: "192.0.2.2", Passive: true, Sockets: []Socket{{Kind: KindEstablished}}, Keys: []Key{{Name: "a", Current: true}}},
			{Peer: "192.0.2.3", Passive: false, Sockets: []Socket{{Kind: KindEstablished}}, Keys: []Key{{Name: "a"}}},
		},
	}}
	c, _ := serve(t, ServerOptions{Backend: fb, Version: "test"})
	ctx := context.Background()

	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version != "test" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	st, err := c.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 2 || len(st.Warnings) != 2 {
		t.Errorf("status: %d peers, warnings %q; want 2 peers, stale+optmem warnings", len(st.Peers), st.Warnings)
	}
	if len(st.Peers[0].Warnings) != 0 {
		t.Errorf("passive peer with a current key has warnings %q", st.Peers[0].Warnings)
	}
	if w := st.Peers[1].Warnings; len(w) != 2 || w[0] != WarnNotPassive || w[1] != WarnNoCurrent {
		t.Errorf("active peer without current key: warnings %q", w)
	}
	if !strings.Contains(st.Warnings[0], "stale") || !strings.Contains(st.Warnings[0], "1h0m0s") {
		t.Errorf("stale warning = %q", st.Warnings[0])
	}
	one, err := c.Status(ctx, "192.0.2.3")
	if err != nil || len(one.Peers) != 1 {
		t.Errorf("Status(peer) = %+v, %v", one, err)
	}
	if _, err := c.Status(ctx, "198.51.100.1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown peer: err = %v, want ErrNotFound", err)
	}
	if p, err := c.Plan(ctx); err != nil || len(p.Plan) != 1 {
		t.Errorf("Plan = %+v, %v", p, err)
	}
	if r, err := c.Rotate(ctx, RotateRequest{Peer: "192.0.2.2"}); err != nil || !r.Peers[0].Started {
		t.Errorf("Rotate = %+v, %v", r, err)
	}
	rv, err := c.Revoke(ctx, RevokeRequest{Chain: "core", Key: "a"})
	if err != nil || rv.Failed() || time.Duration(rv.Elapsed) != 3*time.Millisecond {
		t.Errorf("Revoke = %+v, %v", rv, err)
	}
	if len(fb.rotates) != 1 || len(fb.revokes) != 1 || fb.revokes[0].Key != "a" {
		t.Errorf("backend saw rotates %+v revokes %+v", fb.rotates, fb.revokes)
	}
}

func TestRequestErrors(t *testing.T) {
	fb := &fakeBackend{}
	c, _ := serve(t, ServerOptions{Backend: fb})
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"rotate neither", func() error { _, err := c.Rotate(ctx, RotateRequest{}); return err }, ErrInvalid},
		{"rotate both", func() error { _, err := c.Rotate(ctx, RotateRequest{Peer: "x", All: true}); return err }, ErrInvalid},
		{"revoke without key", func() error { _, err := c.Revoke(ctx, RevokeRequest{Chain: "core"}); return err }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if len(fb.rotates)+len(fb.revokes) != 0 {
		t.Errorf("invalid requests reached the backend: %+v %+v", fb.rotates, fb.revokes)
	}
	fb.failAll = errors.New("kernel on fire")
	if _, err := c.Plan(ctx); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "kernel on fire") {
		t.Errorf("backend failure: err = %v, want ErrServer with the message", err)
	}
}

func TestUnreachable(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "none.sock"), time.Second)
	if _, err := c.Health(context.Background()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("err = %v, want ErrUnreachable", err)
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "control.sock")
	l, err := Listen(path, ListenOptions{GID: 4242, HaveGID: os.Getuid() == 0})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("socket mode = %v, want socket 0660", fi.Mode())
	}
	if os.Getuid() == 0 {
		if gid := fileGID(fi); gid != 4242 {
			t.Errorf("socket gid = %d, want 4242", gid)
		}
	}
	if _, err := Listen(path, ListenOptions{}); !errors.Is(err, ErrInUse) {
		t.Errorf("second Listen: err = %v, want ErrInUse", err)
	}
	// A stale socket (its daemon died without unlinking) is replaced.
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(path, ListenOptions{Mode: 0o600})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind after Close: %v", err)
	}
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(plain, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: err = %v", err)
	}
}

func TestHandlerWithoutCredentialsRefuses(t *testing.T) {
	var logs bytes.Buffer
	refused := 0
	s := NewServer(ServerOptions{Backend: &fakeBackend{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Refused: func() { refused++ }})
	// A TCP listener carries no SO_PEERCRED: everything is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	defer s.Shutdown(context.Background())
	resp, err := http.Get("http://" + l.Addr().String() + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || refused != 1 || !strings.Contains(logs.String(), "control request refused") {
		t.Errorf("status %d, refused %d, log %q", resp.StatusCode, refused, logs.String())
	}
}
