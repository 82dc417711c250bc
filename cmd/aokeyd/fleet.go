package main

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/supervise"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/prometheus/client_golang/prometheus"
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

// fleetCore is what the fleet publisher reads and drives: the daemon, or
// the native BIRD driver.
type fleetCore interface {
	Status(ctx context.Context, peer string) (control.StatusReport, error)
	RevokeFleet(ctx context.Context, chain, key string) (control.RevokeResult, error)
}

// migrationFollower is a core that starts a link's migration when the far
// end's document shows one (the daemon; BIRD driven natively does not
// migrate).
type migrationFollower interface {
	FollowMigration(ctx context.Context, router string, addr netip.Addr, vrf string, at time.Time, bound time.Duration)
	MigrationFollowWanted() bool
}

var (
	_ migrationFollower = (*daemon.Daemon)(nil)
	_ fleetCore         = (*daemon.Daemon)(nil)
	_ fleetCore         = (*birdnative.Driver)(nil)
)

// fleetPublisher is the supervised piece that publishes this router's
// status to the fleet path in Vault every refresh and applies the fleet's
// revocations. It shares the key source's Vault client and token. Its
// failures are logged and counted; it never stops aokeyd, and the
// reconcile loop never waits on it. The daemon wakes it (through w) when
// a session's keys or roll state change, so a roll is published within
// a quarter of the refresh, not at the next one.
func fleetPublisher(cfg *config.Config, switchTimeout time.Duration, v *keystore.VaultSource, d fleetCore, w *fleetWaker, reg prometheus.Registerer, log *slog.Logger) (supervise.Runnable, error) {
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
	var follow func(context.Context, fleet.FarMigration)
	var followWanted func() bool
	if f, ok := d.(migrationFollower); ok {
		follow = func(ctx context.Context, m fleet.FarMigration) {
			f.FollowMigration(ctx, m.Router, m.Peer.Addr, m.Peer.VRF, m.At, m.Bound)
		}
		followWanted = f.MigrationFollowWanted
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
		FollowWanted:  followWanted,
		Logger:        log.With("piece", "fleet"),
		Metrics:       m,
	})
	w.p.Store(p)
	return supervise.Runnable{Name: "fleet", Run: p.Run}, nil
}
