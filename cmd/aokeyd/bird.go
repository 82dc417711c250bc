package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/supervise"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// serveBird runs aokeyd for a BIRD it drives natively (speaker.type bird):
// the key files, BIRD's reconfiguration and the control API, instead of
// the daemon that borrows a speaker's sockets.
func serveBird(ctx context.Context, cfg *config.Config, pol *policy.Policy, cfgPath, stateDir string, src keystore.Source, cache *keystore.Cache, m *metrics.Metrics, reg prometheus.Registerer, log *slog.Logger) error {
	b := cfg.Speaker.Bird
	d, err := birdnative.New(birdnative.Options{
		Keys: cache, Source: src, Policy: pol, Dir: b.KeysDir, Control: b.ControlSocket, Bird: b.Binary,
		PID:             func() (int, error) { return frr.FindPID(b.PIDFile, b.ProcessName) },
		Refresh:         time.Duration(cfg.KeySource.Refresh),
		Poll:            time.Duration(b.PollInterval),
		RevocationsFile: filepath.Join(stateDir, "bird-revocations.json"),
		Logger:          log,
		Metrics:         m,
	})
	if err != nil {
		return err
	}
	control, err := controlAPI(cfg, d, m, log)
	if err != nil {
		return err
	}
	metricsHTTP, err := metricsListener(cfg.Metrics, m.Handler())
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	pieces := []supervise.Runnable{{Name: "bird", Run: d.Run}, control, metricsHTTP,
		{Name: "reload", Run: func(ctx context.Context) error { watchReload(ctx, hup, cfgPath, d, log); return nil }}}
	if v, ok := src.(*keystore.VaultSource); ok {
		if cfg.Fleet != nil {
			fp, err := fleetPublisher(cfg, pol.Safety().SwitchTimeout, v, d, &fleetWaker{}, reg, log)
			if err != nil {
				return err
			}
			pieces = append(pieces, fp)
		}
		pieces = append([]supervise.Runnable{{Name: "vault-token", Run: v.Run}}, pieces...)
	}
	log.Info("aokeyd started", "version", version, "key_source", src.Name(), "speaker", "bird (native)", "keys_dir", b.KeysDir, "control", cfg.Control.Socket)
	notify("READY=1")
	err = supervise.Run(ctx, log, stopTimeout, pieces...)
	notify("STOPPING=1")
	return err
}
