package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/revocation"
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
		PID:             processFinder(cfg.SpeakerProcess()),
		Port:            cfg.SpeakerKind().Port,
		Refresh:         time.Duration(cfg.KeySource.Refresh),
		Poll:            time.Duration(b.PollInterval),
		RevocationsFile: filepath.Join(stateDir, revocation.File), // the daemon's: one record whichever the speaker
		Logger:          log,
		Metrics:         m,
	})
	if err != nil {
		return err
	}
	return superviseCore(ctx, cfg, pol, cfgPath, src, m, reg, log, d, "bird", &fleetWaker{}, nil, "speaker", "bird (native)", "keys_dir", b.KeysDir)
}
