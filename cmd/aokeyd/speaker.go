package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/metrics"
)

// openSpeaker connects to the configured BGP speaker: gobgpd's gRPC API or
// FRR's bgpd through its vty socket. The closer ends the connection.
func openSpeaker(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (bgp.Speaker, io.Closer, error) {
	if f := cfg.Speaker.FRR; cfg.SpeakerKind() == config.FRRKind && f != nil {
		sp := frr.New(frr.Options{
			Name:         "frr bgpd " + frr.VtySocketIn(f.VtySocket, f.Pathspace).Path,
			Runner:       frr.VtySocketIn(f.VtySocket, f.Pathspace),
			PID:          frrPID(f),
			PollInterval: time.Duration(f.PollInterval),
			Log:          log,
			OnCall:       m.SpeakerRPC,
		})
		return sp, io.NopCloser(nil), nil
	}
	line := cfg.Speaker.API
	if line == config.GoBGPAPIAuto {
		line = gobgp.APIAuto
	}
	sp, closer, err := gobgp.Dial(cfg.GoBGP.Address, gobgp.Options{
		API:  line,
		Name: "gobgpd " + cfg.GoBGP.Address,
		PID:  pidFinder(cfg.GoBGP),
		Log:  log,
		// A restarted gobgpd must be followed within seconds.
		MaxBackoff: 3 * time.Second,
		OnRPC:      m.SpeakerRPC,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gobgp %s: %w", cfg.GoBGP.Address, err)
	}
	return sp, closer, nil
}

// frrPID finds FRR's bgpd: its pid file, or when that does not exist the
// one process named ProcessName. Not for an FRR started with a pathspace
// (-N): several instances run side by side then, a process scan cannot
// tell them apart, and the one bgpd it finds while this instance's
// restarts (its pid file gone) is another instance's, whose sockets are
// not aokeyd's to key. The pid file alone names it.
func frrPID(f *config.FRR) func(context.Context) (int, error) {
	name := f.ProcessName
	if f.Pathspace != "" {
		name = ""
	}
	return func(context.Context) (int, error) { return frr.FindPID(f.PIDFile, name) }
}
