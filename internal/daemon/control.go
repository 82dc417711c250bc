package daemon

import (
	"context"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/connectguard"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The Daemon's entry points: the control API (control.Backend), the fleet
// publisher's, the listen guard's and the connect helper's, and the
// tracker's session events. Each hands the request to the part that owns
// what it reads or changes; none holds state here.

var (
	_ control.Backend     = (*Daemon)(nil)
	_ control.RollWatcher = (*Daemon)(nil)
)

// Kick asks for a full reconcile pass now: desired state recomputed and
// the listeners re-read from the kernel.
func (d *Daemon) Kick() { d.rec.askFull() }

// Passes reports how many reconcile passes have run: idle ones (no input
// changed and no full pass due: nothing computed, nothing read from the
// kernel) and full ones.
func (d *Daemon) Passes() (idle, full uint64) { return d.rec.passes() }

// OnEstablished implements bgp.SessionObserver (peers.go).
func (d *Daemon) OnEstablished(ctx context.Context, info bgp.PeerInfo, h bgp.SocketHandle) {
	d.table.OnEstablished(ctx, info, h)
}

// OnDown implements bgp.SessionObserver (peers.go).
func (d *Daemon) OnDown(ctx context.Context, info bgp.PeerInfo) { d.table.OnDown(ctx, info) }

// Status implements control.Backend (statusview.go).
func (d *Daemon) Status(ctx context.Context, peer string) (control.StatusReport, error) {
	return d.stat.status(ctx, peer)
}

// Plan implements control.Backend (planview.go).
func (d *Daemon) Plan(ctx context.Context) (control.PlanReport, error) {
	if d.co.o.Executor != nil {
		return d.rec.execPlan(ctx)
	}
	return d.rec.plan(ctx)
}

// Rotate implements control.Backend (rotate.go).
func (d *Daemon) Rotate(ctx context.Context, req control.RotateRequest) (control.RotateResult, error) {
	return d.early.rotate(ctx, req)
}

// Revoke implements control.Backend (revoke.go).
func (d *Daemon) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	return d.revs.request(ctx, req)
}

// RevokeFleet applies a revocation the fleet document carries (revoke.go).
func (d *Daemon) RevokeFleet(ctx context.Context, chain, key string) (control.RevokeResult, error) {
	return d.revs.fleet(ctx, chain, key)
}

// Replace implements control.Backend (replace.go).
func (d *Daemon) Replace(ctx context.Context, req control.ReplaceRequest) (control.ReplaceResult, error) {
	if err := d.co.refuses(opReplace); err != nil {
		return control.ReplaceResult{}, err
	}
	return d.owns.replace(ctx, req)
}

// Adopt implements control.Backend (adopt.go).
func (d *Daemon) Adopt(ctx context.Context, req control.AdoptRequest) (control.AdoptResult, error) {
	if err := d.co.refuses(opAdopt); err != nil {
		return control.AdoptResult{}, err
	}
	return d.owns.adopt(ctx, req)
}

// Migrate implements control.Backend (migrate.go).
func (d *Daemon) Migrate(ctx context.Context, req control.MigrateRequest) (control.MigrateResult, error) {
	if err := d.co.refuses(opMigrate); err != nil {
		return control.MigrateResult{}, err
	}
	return d.migrs.handle(ctx, req)
}

// FollowMigration starts the migration the far end's fleet document shows
// for a link (migrate.go).
func (d *Daemon) FollowMigration(ctx context.Context, router string, addr netip.Addr, vrf string, at time.Time, bound time.Duration) {
	d.migrs.follow(ctx, router, addr, vrf, at, bound)
}

// MigrationFollowWanted reports whether the fleet publisher should follow
// the far ends' migrations (migrate.go).
func (d *Daemon) MigrationFollowWanted() bool { return d.migrs.followWanted() }

// Rolls reports each peer's last roll steps (rolls.go).
func (d *Daemon) Rolls(ctx context.Context, req control.RollsRequest) (control.RollsReport, error) {
	return d.stat.rollsReport(ctx, req)
}

// SetConfigWarnings names the settings a reload could not apply
// (statusview.go).
func (d *Daemon) SetConfigWarnings(w []string) { d.stat.setConfigWarnings(w) }

// ConnectKeys gives the keys for one of the speaker's connects (connect.go).
func (d *Daemon) ConnectKeys(pid int, dst netip.AddrPort) (keys []tcpao.Key, current, rnext uint8, ok bool) {
	return d.conns.connectKeys(pid, dst)
}

// ConnectMD5 gives the TCP-MD5 password for one of the speaker's connects
// (connect.go).
func (d *Daemon) ConnectMD5(pid int, dst netip.AddrPort) (tcpao.MD5Key, bool) {
	return d.conns.connectMD5(pid, dst)
}

// ListenKeys is the connect guard's Listen (connectguard.ListenFunc):
// listen.go.
func (d *Daemon) ListenKeys(ctx context.Context, l connectguard.ListenSocket) error {
	return d.rec.listenKeys(ctx, l)
}
