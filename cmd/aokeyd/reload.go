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

// reload validates the configuration at path, its policy and its keys
// again, as aokeyd does at start (the same Check, checkOptions), and
// applies what a running aokeyd can take: the policy (read again) and the
// log level. Every other setting that differs from running (the
// configuration aokeyd started with: its key source, speaker, control
// socket, metrics...) keeps its running value until a restart, and is
// named: a log line and a status warning each, until a reload finds it
// back at its running value. It returns the status warnings it leaves
// standing for those settings (restart), which the next reload keeps
// when it is refused.
//
// A reload refuses what the start refuses (config.Checked.Refused),
// keys included: nothing of the new files is applied, and the daemon runs
// on with its running policy and log level; each problem is logged in
// validate's words, and status warns that the reload was refused, naming
// the first, until a reload passes. It never exits: everything valid
// keeps working. The key source is read at once either way, as every
// key_source.refresh reads it (keystore.Cache): its valid keys apply, a
// key that is now rejected keeps its last good version, and status names
// it (a held-back key). A Vault that gives no answer is no refusal, as at
// start: the policy is applied and the last good keys stay.
func (h host) reload(ctx context.Context, path string, running *config.Config, d reloader, log *slog.Logger, restart []string) []string {
	c := config.Check(ctx, path, h.checkOptions(log))
	defer c.Snapshot.Zero()
	if ps := c.Refused(); len(ps) > 0 {
		for _, p := range ps {
			log.Error("reload refused; the running configuration stays", "err", p)
		}
		d.SetConfigWarnings(append(slices.Clone(restart), refusedWarning(path, ps)))
		if err := d.RefreshKeys(ctx); err != nil {
			log.Warn("reload: key source read failed; last good snapshot stays", "err", err)
		}
		return restart
	}
	for _, p := range c.Unanswered {
		log.Warn("reload: the key source gave no answer; the policy is applied and the last good keys stay", "problem", p)
	}
	logWarnings(log, c)
	d.SetPolicy(c.Policy)
	if lvl, err := c.Config.Log.SlogLevel(); err == nil && setLogLevel(log, lvl) {
		log.Info("reload: log level set", "level", c.Config.Log.Level)
	}
	need := config.NeedRestart(running, c.Config)
	restart = nil
	for _, s := range need {
		log.Warn("reload: this setting changed in the configuration; it takes effect on restart (systemctl restart aokeyd), the running value stays",
			"setting", s, "config", path)
		restart = append(restart, restartWarning(path, s))
	}
	d.SetConfigWarnings(restart)
	if err := d.RefreshKeys(ctx); err != nil {
		log.Warn("reload: key source read failed; last good snapshot stays", "err", err)
	}
	// The policy file is read again whatever changed; applied names the
	// settings of aokeyd.yaml a reload applies that changed since start.
	applied := slices.DeleteFunc(config.Changed(running, c.Config), func(s string) bool { return slices.Contains(need, s) })
	log.Info("reloaded", "policy", c.Policy.File(), "applied", applied, "restart_needed", need)
	return restart
}

// restartWarning is status's warning for a setting that changed and waits
// for a restart.
func restartWarning(path, setting string) string {
	return fmt.Sprintf("%s: %s changed, and takes effect on restart only (systemctl restart aokeyd); aokeyd runs with the value it started with", path, setting)
}

// refusedWarning is status's warning for a refused reload: how many
// problems, the first in validate's words (which show no secret).
func refusedWarning(path string, ps []error) string {
	n := "1 problem"
	if len(ps) > 1 {
		n = fmt.Sprintf("%d problems", len(ps))
	}
	return fmt.Sprintf("%s: the last reload was refused (%s, the first: %s); aokeyd runs on with the configuration, policy and keys it had, "+
		"until a reload passes (aoctl validate %s lists every problem)", path, n, ps[0], path)
}

// watchReload reloads the configuration on every signal from hup until
// ctx ends.
func (h host) watchReload(ctx context.Context, hup <-chan os.Signal, cfgPath string, running *config.Config, d reloader, log *slog.Logger) {
	var restart []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			restart = h.reload(ctx, cfgPath, running, d, log, restart)
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
