package main

import (
	"log/slog"
	"time"

	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/daemon"
)

// openBird is BIRD's executor (speaker.type bird): its include files,
// BIRD's reconfiguration and the read-back of its sockets, beneath the
// daemon's pass.
func openBird(cfg *config.Config, log *slog.Logger) (daemon.Executor, error) {
	b := cfg.Speaker.Bird
	gid, err := birdReadGID(b)
	if err != nil {
		return nil, err
	}
	return birdnative.Open(birdnative.ExecOptions{Dir: b.KeysDir, Control: b.ControlSocket, Bird: b.Binary, ReadGID: gid,
		PID: processFinder(cfg.SpeakerProcess()), Port: cfg.SpeakerKind().Port, Poll: time.Duration(b.PollInterval), Logger: log})
}
