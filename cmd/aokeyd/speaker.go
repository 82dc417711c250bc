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
	if f := cfg.Speaker.FRR; cfg.IsFRR() && f != nil {
		sp := frr.New(frr.Options{
			Name:         "frr bgpd " + frr.VtySocketIn(f.VtySocket, f.Pathspace).Path,
			Runner:       frr.VtySocketIn(f.VtySocket, f.Pathspace),
			PID:          func(context.Context) (int, error) { return frr.FindPID(f.PIDFile, f.ProcessName) },
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
