package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/supervise"
	"github.com/aokeyd/aokeyd/keystore"
)

// fleetWaker hands the daemon's Changed to the fleet publisher, built
// after the daemon; until then (or with no fleet configured) a change
// wakes nobody.
type fleetWaker struct {
	p atomic.Pointer[fleet.Publisher]
}

// Wake wakes the publisher, if any; it never blocks.
func (w *fleetWaker) Wake() {
	if p := w.p.Load(); p != nil {
		p.Wake()
	}
}

// fleetPublisher is the supervised piece that publishes this router's
// status to the fleet path in Vault every refresh and applies the fleet's
// revocations. It shares the key source's Vault client and token. Its
// failures are logged and counted; it never stops aokeyd, and the
// reconcile loop never waits on it. The daemon wakes it (through w) when
// a session's keys or roll state change, so a roll is published within
// a quarter of the refresh, not at the next one.
func fleetPublisher(cfg *config.Config, switchTimeout time.Duration, v *keystore.VaultSource, d *daemon.Daemon, w *fleetWaker, reg prometheus.Registerer, log *slog.Logger) (supervise.Runnable, error) {
	mount, prefix, err := fleet.ParsePath(cfg.Fleet.VaultPath)
	if err != nil {
		return supervise.Runnable{}, err
	}
	var ops []string
	for _, op := range fleet.Ops() {
		ops = append(ops, op.String())
	}
	m, err := metrics.NewFleet(reg, ops)
	if err != nil {
		return supervise.Runnable{}, err
	}
	// A speaker whose kind migrates none (Caps.Migrate) is not asked to
	// follow (Daemon.MigrationFollowWanted).
	follow := func(ctx context.Context, m fleet.FarMigration) {
		d.FollowMigration(ctx, m.Router, m.Peer.Addr, m.Peer.VRF, m.At, m.Bound)
	}
	p := fleet.NewPublisher(fleet.Options{
		Store:         fleet.Store{V: v, Mount: mount, Prefix: prefix},
		RouterID:      cfg.Fleet.RouterID,
		Addresses:     cfg.Fleet.Addresses,
		Refresh:       time.Duration(cfg.KeySource.Refresh),
		SwitchTimeout: switchTimeout,
		Status:        func(ctx context.Context) (control.StatusReport, error) { return d.Status(ctx, "") },
		Revoke:        d.RevokeFleet,
		Follow:        follow,
		FollowWanted:  d.MigrationFollowWanted,
		Logger:        log.With("piece", "fleet"),
		Metrics:       m,
	})
	w.p.Store(p)
	return supervise.Runnable{Name: "fleet", Run: p.Run}, nil
}
