package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// serveBird runs aokeyd for a BIRD it drives natively (speaker.type bird):
// the key files, BIRD's reconfiguration and the control API, instead of
// the daemon that borrows a speaker's sockets.
func serveBird(ctx context.Context, cfg *config.Config, pol *policy.Policy, cfgPath, stateDir string, src keystore.Source, cache *keystore.Cache, m *metrics.Metrics, reg prometheus.Registerer, log *slog.Logger) error {
	b := cfg.Speaker.Bird
	gid, err := birdReadGID(b)
	if err != nil {
		return err
	}
	d, err := birdnative.New(birdnative.Options{
		Keys: cache, Source: src, Policy: pol, Dir: b.KeysDir, Control: b.ControlSocket, Bird: b.Binary, ReadGID: gid,
		PID:             func() (int, error) { return birdPID(b) },
		Refresh:         time.Duration(cfg.KeySource.Refresh),
		Poll:            time.Duration(b.PollInterval),
		RevocationsFile: filepath.Join(stateDir, "bird-revocations.json"),
		Logger:          log,
		Metrics:         m,
	})
	if err != nil {
		return err
	}
	return superviseCore(ctx, cfg, pol, cfgPath, src, m, reg, log, d, "bird", &fleetWaker{}, nil, "speaker", "bird (native)", "keys_dir", b.KeysDir)
}

// birdPID finds BIRD: by its pid file when one is set; else the process
// listening on its control socket, in this network namespace (Debian's
// unit writes no pid file, and a router with bird2 and bird3, or a BIRD in
// another namespace, has more than one process named bird); else the one
// process by that name.
func birdPID(b *config.Bird) (int, error) {
	const birdPIDSetting = "speaker.bird.pid_file"
	if b.PIDFile != "" {
		return sockets.FindPID(b.PIDFile, b.ProcessName, birdPIDSetting)
	}
	pid, err := sockets.UnixListenerOwner(b.ControlSocket)
	if err == nil || errors.Is(err, sockets.ErrNoProcess) {
		return pid, err
	}
	return sockets.FindProcess(b.ProcessName, birdPIDSetting)
}
