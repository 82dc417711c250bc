//go:build linux

package bench

// The revoke item: one key revoked across every session of a running
// aokeyd, timed from the request to the last socket clean.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
)

// timedBackend records when the revoke request reached the daemon and
// when the daemon was done with it (every socket handled, the source told).
type timedBackend struct {
	control.Backend
	in, out atomic.Int64 // unix ns
}

func (b *timedBackend) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	b.in.Store(time.Now().UnixNano())
	defer func() { b.out.Store(time.Now().UnixNano()) }()
	return b.Backend.Revoke(ctx, req)
}

// localCopy copies the executable at path into dir and returns the copy.
func localCopy(path, dir string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("bench: copying %s: %w", path, err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return "", fmt.Errorf("bench: copying %s: %w", path, err)
	}
	return dst, nil
}

// revokeRun is the emergency revoke: `aoctl revoke core/k1` against a daemon managing n
// established sessions and the listener, timed from exec to exit.
func (r *runner) revokeRun(ctx context.Context, n int) (*RevokeRun, error) {
	aoctl := r.cfg.Aoctl
	if aoctl == "" {
		aoctl = "aoctl"
	}
	path, err := lab.Bin(aoctl)
	if err != nil {
		return nil, fmt.Errorf("bench: revoke needs the aoctl binary: %w", err)
	}
	e, run, spans, err := r.bringUp(ctx, n, 2, daemonOpts{})
	if err != nil {
		return nil, err
	}
	defer e.close()
	res := &RevokeRun{Peers: n, KeysPerPeer: 2, StartUp: spans[0], Takeover: spans[1]}
	res.ListenerKeys, _ = countKeys(e.f.lnSock, -1)

	dir, err := os.MkdirTemp("", "aokeyd-bench-ctl")
	if err != nil {
		return nil, errors.Join(err, run.stop())
	}
	defer os.RemoveAll(dir)
	sockPath := filepath.Join(dir, "aokeyd.sock")
	ln, err := control.Listen(sockPath, control.ListenOptions{Mode: 0o600})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: control socket: %w", err), run.stop())
	}
	tb := &timedBackend{Backend: run.d}
	srv := control.NewServer(control.ServerOptions{Backend: tb, Logger: r.log.With("part", "control"), Started: time.Now()})
	go func() { _ = srv.Serve(ln) }()
	// aoctl runs from local storage, as on a router: the guest's share
	// directory is a 9p mount, slow to page a binary in from.
	if path, err = localCopy(path, dir); err != nil {
		return nil, errors.Join(err, run.stop())
	}

	// The cost of starting aoctl alone (it prints its usage and exits).
	t0 := time.Now()
	_ = exec.CommandContext(ctx, path, "--help").Run()
	res.ExecBaseline = int64(time.Since(t0))

	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--socket", sockPath, "--json", "revoke", fleetChain+"/k1")
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 = time.Now()
	cerr := cmd.Run()
	res.Wall = int64(time.Since(t0))
	if in, out := tb.in.Load(), tb.out.Load(); in != 0 && out != 0 {
		res.ToArrival, res.ToDone = in-t0.UnixNano(), out-t0.UnixNano()
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(shut)
	cancel()
	r.log.Info("aoctl revoke returned", "peers", n, "wall", time.Duration(res.Wall), "err", cerr)
	var rr control.RevokeResult
	if err := json.Unmarshal(out.Bytes(), &rr); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: aoctl revoke output (exit %v, stderr %q): %w", cerr, strings.TrimSpace(errb.String()), err), run.stop())
	}
	res.ExitOK = cerr == nil
	res.Server = int64(rr.Elapsed)
	res.SourceRevoked = rr.SourceRevoked
	res.Actions = map[string]int{}
	for _, s := range rr.Sockets {
		res.Actions[string(s.Action)]++
		if s.Error != "" {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = s.Socket + ": " + s.Error
			}
		}
	}
	if err := run.stop(); err != nil {
		return nil, err
	}

	// Every socket lost the key; the sessions still carry data.
	if c, err := countKeys(e.f.lnSock, 1); err == nil && c == 0 {
		res.KeyGone++
	}
	for i := range e.f.n {
		s := e.f.disc.Socket(uint64(i + 2)) // inode 1 is the listener
		if c, err := countKeys(s, 1); err == nil && c == 0 {
			if info, err := s.Info(); err == nil && info.HaveCurrent && info.CurrentKey == 2 {
				res.KeyGone++
			}
		}
	}
	ok, xerr := e.f.exchange()
	res.DataOK = ok
	if xerr != nil {
		res.DataError = xerr.Error()
	}
	r.log.Info("revoke checked", "sockets_without_key", res.KeyGone, "sessions_with_data", res.DataOK)
	return res, nil
}
