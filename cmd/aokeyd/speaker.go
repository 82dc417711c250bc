package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/rcu"
)

// speakerOpener connects to a speaker whose sockets aokeyd keys
// (config.OpensSpeaker); the closer ends the connection.
type speakerOpener func(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (bgp.Speaker, io.Closer, error)

// executorOpener makes the executor of a speaker that keys its own
// sockets (config.OpensExecutor), beneath the daemon's pass; m counts its
// calls to the speaker.
//
// exp expedites RCU grace periods around the speaker's batches of key
// deletes (kernel.expedite_rcu; nil: off).
type executorOpener func(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, exp *rcu.Expediter) (daemon.Executor, error)

// The adapters of the registry's entries (config.SpeakerKinds), the one
// place a kind is mapped to code: each entry that opens as a Speaker has
// its opener, each that opens as an executor its executor
// (TestEveryKindOpens).
var (
	speakerOpeners = map[*config.SpeakerKind]speakerOpener{config.GoBGPKind: openGoBGP, config.FRRKind: openFRR}
	executors      = map[*config.SpeakerKind]executorOpener{config.BirdKind: openBird}
)

// openSpeaker connects to the configured speaker with its kind's opener.
func openSpeaker(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (bgp.Speaker, io.Closer, error) {
	k := cfg.SpeakerKind()
	open, ok := speakerOpeners[k]
	if !ok {
		return nil, nil, fmt.Errorf("speaker.type %s is not opened as a speaker whose sockets aokeyd keys", k.Name)
	}
	return open(cfg, log, m)
}

// openFRR reaches FRR's bgpd through its vty socket.
func openFRR(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (bgp.Speaker, io.Closer, error) {
	f := cfg.Speaker.FRR
	find := processFinder(cfg.SpeakerProcess())
	sp := frr.New(frr.Options{
		Name:         "frr bgpd " + frr.VtySocketIn(f.VtySocket, f.Pathspace).Path,
		Runner:       frr.VtySocketIn(f.VtySocket, f.Pathspace),
		PID:          func(context.Context) (int, error) { return find() },
		PollInterval: time.Duration(f.PollInterval),
		Log:          log,
		OnCall:       m.SpeakerRPC,
	})
	return sp, io.NopCloser(nil), nil
}

// openGoBGP dials gobgpd's gRPC API.
func openGoBGP(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (bgp.Speaker, io.Closer, error) {
	line := cfg.Speaker.API
	if line == config.GoBGPAPIAuto {
		line = gobgp.APIAuto
	}
	find := processFinder(cfg.SpeakerProcess())
	sp, closer, err := gobgp.Dial(cfg.GoBGP.Address, gobgp.Options{
		API:  line,
		Name: "gobgpd " + cfg.GoBGP.Address,
		PID:  func(context.Context) (int, error) { return find() },
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

// processFinder finds a speaker's process as its registry entry says
// (config.Process): by its pid file when one is set (and, when that file
// does not exist, by the process name, unless the entry gives none); else
// the process listening on its unix socket, in this network namespace;
// else the one process by that name. An ambiguous name's error names the
// entry's own pid file setting.
func processFinder(p config.Process) func() (int, error) {
	return func() (int, error) {
		if p.PIDFile != "" {
			return sockets.FindPID(p.PIDFile, p.Name, p.Setting)
		}
		if p.UnixSocket != "" {
			pid, err := sockets.UnixListenerOwner(p.UnixSocket)
			if err == nil || errors.Is(err, sockets.ErrNoProcess) {
				return pid, err
			}
		}
		return sockets.FindProcess(p.Name, p.Setting)
	}
}
