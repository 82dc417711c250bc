package main

import (
	"log/slog"
	"time"

	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/rcu"
)

// openBird is BIRD's executor (speaker.type bird): its include files,
// BIRD's reconfiguration and the read-back of its sockets, beneath the
// daemon's pass. Its commands to BIRD's control socket are counted in
// aokeyd_speaker_rpcs_total (method "birdc configure", ...).
func openBird(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, exp *rcu.Expediter) (daemon.Executor, error) {
	b := cfg.Speaker.Bird
	gid, err := birdReadGID(b)
	if err != nil {
		return nil, err
	}
	return birdnative.Open(birdnative.ExecOptions{Dir: b.KeysDir, Control: b.ControlSocket, Bird: b.Binary, ReadGID: gid,
		PID: processFinder(cfg.SpeakerProcess()), Port: cfg.SpeakerKind().Port, Poll: time.Duration(b.PollInterval), Logger: log,
		OnCommand: m.SpeakerRPC, Expedite: exp.Hold})
}
