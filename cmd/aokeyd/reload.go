package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/policy"
)

// reloader is what a reload changes in the running core: the daemon, or
// the native BIRD driver.
type reloader interface {
	SetPolicy(*policy.Policy)
	RefreshKeys(context.Context) error
	// SetConfigWarnings replaces status's warnings about aokeyd.yaml:
	// the settings a reload could not apply.
	SetConfigWarnings([]string)
}

// reload validates the configuration at path and its policy again, as
// aokeyd does at start, and applies what a running aokeyd can take: the
// policy (read again) and the log level. Every other setting that differs
// from running (the configuration aokeyd started with: its key source,
// speaker, control socket, metrics...) keeps its running value until a
// restart, and is named: a log line each and a status warning each, until
// a reload finds it back at its running value. A bad configuration is
// refused and nothing changes.
func reload(ctx context.Context, path string, running *config.Config, d reloader, log *slog.Logger) {
	c := config.Check(ctx, path, config.CheckOptions{Logger: log, VRFDevice: config.LocalVRF})
	defer c.Snapshot.Zero()
	if !c.OK() {
		for _, p := range c.Problems {
			log.Error("reload refused; the running configuration stays", "err", p)
		}
		return
	}
	logWarnings(log, c)
	d.SetPolicy(c.Policy)
	if lvl, err := c.Config.Log.SlogLevel(); err == nil && setLogLevel(log, lvl) {
		log.Info("reload: log level set", "level", c.Config.Log.Level)
	}
	restart := config.NeedRestart(running, c.Config)
	var warnings []string
	for _, s := range restart {
		log.Warn("reload: this setting changed in the configuration; it takes effect on restart (systemctl restart aokeyd), the running value stays",
			"setting", s, "config", path)
		warnings = append(warnings, restartWarning(path, s))
	}
	d.SetConfigWarnings(warnings)
	if err := d.RefreshKeys(ctx); err != nil {
		log.Warn("reload: key source read failed; last good snapshot stays", "err", err)
	}
	// The policy file is read again whatever changed; applied names the
	// settings of aokeyd.yaml a reload applies that changed since start.
	applied := slices.DeleteFunc(config.Changed(running, c.Config), func(s string) bool { return slices.Contains(restart, s) })
	log.Info("reloaded", "policy", c.Policy.File(), "applied", applied, "restart_needed", restart)
}

// restartWarning is status's warning for a setting that changed and waits
// for a restart.
func restartWarning(path, setting string) string {
	return fmt.Sprintf("%s: %s changed, and takes effect on restart only (systemctl restart aokeyd); aokeyd runs with the value it started with", path, setting)
}

// watchReload reloads the configuration on every signal from hup until
// ctx ends.
func watchReload(ctx context.Context, hup <-chan os.Signal, cfgPath string, running *config.Config, d reloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(ctx, cfgPath, running, d, log)
		}
	}
}

// leveled is a log handler whose level a reload sets.
type leveled struct {
	slog.Handler
	level *slog.LevelVar
}

func (h leveled) WithAttrs(as []slog.Attr) slog.Handler {
	return leveled{h.Handler.WithAttrs(as), h.level}
}

func (h leveled) WithGroup(name string) slog.Handler {
	return leveled{h.Handler.WithGroup(name), h.level}
}

// setLogLevel sets log's level, when newLogger made it; false when it was
// that level already, or log's level cannot be set.
func setLogLevel(log *slog.Logger, l slog.Level) bool {
	h, ok := log.Handler().(leveled)
	if !ok || h.level.Level() == l {
		return false
	}
	h.level.Set(l)
	return true
}
