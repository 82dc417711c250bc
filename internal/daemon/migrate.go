package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// migrations is the migration controller beside internal/migrate: it
// starts, follows, advances and rolls back the TCP-MD5 to TCP-AO moves,
// and alone writes their record (store). The passes ask it where a
// migrating peer's keys sit (migrationPrefix) and whether a session is
// the migration's (md5Session); Generation is a pass input.
type migrations struct {
	*core
	store *migrate.Store // TCP-MD5 to TCP-AO migrations, durably
}

// Generation changes with every write of the record (a pass input).
func (mg *migrations) Generation() uint64 { return mg.store.Generation() }

// All lists the recorded migrations.
func (mg *migrations) All() []migrate.Record { return mg.store.All() }

// TCP-MD5 to TCP-AO migrations (internal/migrate has the machine and why
// it is safe). What a migration changes of the desired state, in one
// place each:
//   - listenerDesired: a migrating or migrated peer's TCP-AO keys go on
//     the listener at the migration's prefix (migrationPrefix);
//   - listenerMD5: its password stays desired until the migration is
//     done, then is retired (rotator.PlanMD5 alone deletes it);
//   - md5Session: its session is managed once its socket carries TCP-AO;
//   - advanceMigrations: each full pass moves the machines on.

// migrationOf is the peer's migration record.
func (mg *migrations) migrationOf(addr netip.Addr, vrf string) (migrate.Record, bool) {
	return mg.store.Get(peer.KeyOf(addr, vrf))
}

// migrationPrefix is where a binding's TCP-AO keys go on the listener:
// its migration's prefix while one is active, else its own neighbor.
func (mg *migrations) migrationPrefix(b policy.Binding) (netip.Prefix, bool) {
	if b.Neighbor.IsSingleIP() {
		if r, ok := mg.migrationOf(b.Neighbor.Addr(), b.VRF); ok && r.Step.Active() {
			return r.Prefix, true
		}
	}
	return b.Neighbor, false
}

// handle is Daemon.Migrate (control.Backend): it records a migration for the
// TCP-MD5 peer (or every one), which the passes then carry out.
func (mg *migrations) handle(ctx context.Context, req control.MigrateRequest) (control.MigrateResult, error) {
	snap, release := mg.shared()
	defer release()
	if snap == nil {
		return control.MigrateResult{}, fmt.Errorf("%w: no good read of the key source yet: try again after it", control.ErrServer)
	}
	now := time.Now()
	pol := mg.policy()
	var targets []policy.Binding
	if req.All {
		for _, b := range pol.Bindings() {
			pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
			r, ok := mg.migrationOf(b.Neighbor.Addr(), b.VRF)
			if err == nil && md5Peer(pk) && b.Neighbor.IsSingleIP() && (!ok || r.Step == migrate.RolledBack || req.Abort) {
				targets = append(targets, b)
			}
		}
	} else {
		addr, err := netip.ParseAddr(req.Peer)
		if err != nil {
			return control.MigrateResult{}, fmt.Errorf("%w: peer %q is not an IP address", control.ErrInvalid, req.Peer)
		}
		b, err := pol.BindingFor(addr.Unmap(), req.VRF)
		if err != nil {
			return control.MigrateResult{}, fmt.Errorf("peer %s: %v: %w", addr, err, control.ErrNotFound)
		}
		if !b.Neighbor.IsSingleIP() {
			return control.MigrateResult{}, fmt.Errorf("%w: peer %s is bound through the prefix %s: migrate a neighbor bound by its own address",
				control.ErrInvalid, addr, b.Neighbor)
		}
		targets = []policy.Binding{b}
	}
	res := control.MigrateResult{Migrations: []control.Migration{}}
	lan := mg.neighborhood(snap, pol, now)
	for _, b := range targets {
		r, err := mg.startMigration(snap, pol, lan, b, req, now)
		if err != nil {
			if req.All {
				mg.log.Warn("not migrating", "peer", b.String(), "err", err)
				continue
			}
			return res, err
		}
		res.Migrations = append(res.Migrations, statusMigration(r))
	}
	mg.recon.resync()
	return res, nil
}

// startMigration checks one binding and records its migration (or its
// abort).
func (mg *migrations) startMigration(snap *keystore.Snapshot, pol *policy.Policy, lan *neighborhood, b policy.Binding, req control.MigrateRequest, now time.Time) (migrate.Record, error) {
	addr := b.Neighbor.Addr()
	old, have := mg.migrationOf(addr, b.VRF)
	if req.Abort {
		if !have || (old.Step != migrate.Prepared && old.Step != migrate.Switching) {
			return old, fmt.Errorf("%w: peer %s has no migration in progress", control.ErrInvalid, addr)
		}
		old.Step, old.Since, old.Reason = migrate.RolledBack, now, "aborted by an operator (aoctl migrate --abort): TCP-MD5 kept"
		return old, mg.store.Put(old)
	}
	if have && old.Step != migrate.RolledBack {
		return old, fmt.Errorf("%w: peer %s: migration already %s (since %s)", control.ErrInvalid, addr, old.Step, old.Since.UTC().Format(time.RFC3339))
	}
	pk, err := pol.Desired(snap, addr, b.VRF, now)
	switch {
	case err != nil:
		return old, fmt.Errorf("peer %s: %w", addr, err)
	case !md5Peer(pk):
		return old, fmt.Errorf("%w: peer %s: key chain %q holds no TCP-MD5 password: nothing to migrate", control.ErrInvalid, addr, pk.SourceChain)
	case pk.Preferred < 0:
		return old, fmt.Errorf("%w: peer %s: key chain %q has no TCP-AO key to send with now: add one before migrating", control.ErrInvalid, addr, pk.SourceChain)
	}
	key := peer.KeyOf(addr, b.VRF)
	ids := lan.ids(b, pk)
	prefix, err := migrate.Covering(addr, ids, lan.others(key), 8)
	if err != nil {
		return old, fmt.Errorf("%w: peer %s: %v", control.ErrInvalid, key, err)
	}
	at := req.At
	if at.IsZero() {
		at = now
	}
	bound := time.Duration(req.Bound)
	if bound == 0 {
		bound = mg.o.MigrationBound
	}
	if bound == 0 {
		bound = migrate.DefaultBound
	}
	r := migrate.Record{Peer: key, Prefix: prefix, At: at, Bound: bound, Step: migrate.Prepared, Since: now}
	mg.log.Info("migration to TCP-AO prepared", "peer", key, "prefix", prefix, "at", at, "bound", bound)
	if err := mg.store.Put(r); err != nil {
		return r, err
	}
	lan.started(key, prefix, ids)
	return r, nil
}

// advanceMigrations moves every migration in progress on by what this
// pass sees, and returns the next instant one may move without anything
// seen. The reconcile goroutine calls it at the start of a pass.
//
// A key source fault holds a migration where it is: while the source's
// last read failed, or the peer's keys cannot be computed, or its chain
// is degraded, no step is taken (the listener keeps both kinds, frozen).
func (mg *migrations) advanceMigrations(ctx context.Context, now time.Time) time.Time {
	var next time.Time
	recs := slices.DeleteFunc(mg.store.All(), func(r migrate.Record) bool { return r.Step != migrate.Prepared && r.Step != migrate.Switching })
	if len(recs) == 0 {
		return next // every pass, the idle ones too: nothing read while nothing migrates
	}
	snap, release := mg.shared()
	defer release()
	sourceDown := mg.o.Keys.Status().LastError != nil
	for _, r := range recs {
		if snap == nil || sourceDown {
			mg.noteHeld(r, "the key source's last read failed")
			continue
		}
		pk, err := mg.recon.peerDesired(mg.policy(), snap, r.Peer.Addr, r.Peer.VRF, now)
		if err != nil || snap.Degraded(pk.SourceChain) {
			mg.noteHeld(r, "the peer's keys cannot be computed from the key source, or its chain is degraded")
			continue
		}
		n := migrate.Advance(r, migrate.Observed{AOSession: mg.aoSession(r.Peer.Addr, r.Peer.VRF), NoAOKey: pk.Preferred < 0}, now)
		if n != r {
			id := r.Peer
			switch n.Step {
			case migrate.RolledBack:
				mg.log.Warn("migration rolled back", "peer", id, "reason", n.Reason)
			default:
				mg.log.Info("migration step", "peer", id, "step", string(n.Step))
			}
			if n.Step == migrate.Switching {
				mg.switchReset(ctx, n)
			}
			if err := mg.store.Put(n); err != nil {
				mg.log.Error("migrations record not written; the step may be lost at a restart", "peer", id, "err", err)
			}
		}
		t := migrate.Next(n)
		if n.Step == migrate.Prepared || n.Step == migrate.Switching {
			// The far end may come back with TCP-AO at any moment, and
			// its first verified segment is what moves the step: look
			// again shortly, not at the next pass something else brings
			// (a pass that saw the new session before it verified
			// anything would otherwise leave it for up to Resync).
			t = sooner(t, now.Add(migrationVerifyPoll))
		}
		next = sooner(next, t)
	}
	return next
}

// recoverMigrations follows the kernel where the migrations record does
// not (issue 47): a TCP-MD5 peer (its chain holds a password) with no
// migration in progress or done whose session runs TCP-AO with verified
// segments is migrated, whatever the record says (it was lost with a
// purge, restored from an old backup, or rolled back while the far end
// went on with TCP-AO). Its record becomes done at the prefix the
// session's keys carry, so its password never goes back on the listener
// and its TCP-AO keys stay. The reconcile goroutine calls it in every
// full pass, the passes session events ask for too (the session may be
// listed only after a start's first pass), before the desired state is
// computed; it reports whether it recorded one, which changes the desired
// state. It reads nothing while no chain holds a password, and only the
// sessions of peers whose chain does.
func (mg *migrations) recoverMigrations(snap *keystore.Snapshot, now time.Time) (recovered bool) {
	if !anyMD5(snap) {
		return false
	}
	pol := mg.policy()
	for _, p := range mg.table.peerList() {
		if p.handle == nil || p.binding == nil || !p.binding.Neighbor.IsSingleIP() {
			continue
		}
		if c, ok := pol.Chain(p.binding.KeyChain); !ok || snap.Chains[c.SourceChain] == nil || snap.Chains[c.SourceChain].MD5 == nil {
			continue // no password in its chain: not a TCP-MD5 peer
		}
		if r, ok := mg.migrationOf(p.info.Neighbor, p.info.VRF); ok && r.Step != migrate.RolledBack {
			continue
		}
		pk, err := mg.recon.peerDesired(pol, snap, p.info.Neighbor, p.info.VRF, now)
		if err != nil || !md5Peer(pk) || !mg.aoSession(p.info.Neighbor, p.info.VRF) {
			continue
		}
		prefix := hostPrefix(p.info.Neighbor.Unmap())
		if ks, err := mg.o.SocketOf(p.handle).Keys(tcpao.KeyFilter{SkipFingerprint: true}); err == nil {
			for _, k := range ks {
				if k.Peer.Contains(p.info.Neighbor.Unmap()) && k.Peer.Bits() < prefix.Bits() {
					prefix = k.Peer.Masked() // the listener's migration prefix, copied to the session
				}
			}
		}
		r := migrate.Record{Peer: peer.KeyOf(p.info.Neighbor, p.info.VRF), Prefix: prefix, At: now, Step: migrate.Done, Since: now,
			Reason: "recovered from the kernel: the session runs TCP-AO with verified segments, and no migration was recorded"}
		if err := mg.store.Put(r); err != nil {
			mg.log.Error("migration recovered from the kernel but not recorded; it is recovered again at the next pass", "peer", p.id, "err", err)
			continue
		}
		mg.log.Warn("TCP-MD5 peer found running TCP-AO with no migration recorded: it is migrated (done); its password stays off the listener. "+
			"Remove md5 from its key chain", "peer", p.id, "prefix", prefix, "chain", pk.SourceChain)
		recovered = true
	}
	return recovered
}

// migratedMD5Warning is the status warning for a peer migrated to TCP-AO
// whose chain still holds its TCP-MD5 password.
func migratedMD5Warning(chain string) string {
	return fmt.Sprintf("the peer was migrated to TCP-AO but its key chain %q still holds md5: the password is never installed again; "+
		"remove md5 from the key chain in the key source (docs/migrate.md)", chain)
}

// migrationVerifyPoll is how often a prepared or switching migration
// looks at its peer's session (one TCP_AO_INFO a peer, only while such a
// migration lasts).
const migrationVerifyPoll = time.Second

// switchReset is the switch for the side that connects: when this
// speaker opens the session itself (aokeyd exec keys its connects, the
// neighbor is not passive) and the session runs TCP-MD5, it is reset once
// so that the next connect carries TCP-AO (ConnectMD5 no longer answers).
// A passive side waits for the far end's connect.
func (mg *migrations) switchReset(ctx context.Context, r migrate.Record) {
	id := r.Peer
	p := mg.table.peer(id)
	if p == nil || !mg.conns.keysActiveOpens(*p.info) || p.info.Passive || !p.info.Established() || mg.aoSession(r.Peer.Addr, r.Peer.VRF) {
		return
	}
	if err := mg.o.Speaker.ResetPeer(ctx, id, "migration to TCP-AO: reconnect with TCP-AO"); err != nil {
		mg.log.Error("migration switch: the session could not be reset; it moves at its next reconnect", "peer", id, "err", err)
		return
	}
	mg.log.Info("migration switch: session reset to reconnect with TCP-AO", "peer", id)
}

// noteHeld logs that a migration holds its step (at debug: every pass).
func (mg *migrations) noteHeld(r migrate.Record, why string) {
	mg.log.Debug("migration holds its step: "+why, "peer", r.Peer, "step", string(r.Step))
}

// aoSession reports whether the peer's session socket carries TCP-AO and
// has verified segments with it.
func (mg *migrations) aoSession(addr netip.Addr, vrf string) bool {
	p := mg.table.peer(peer.KeyOf(addr, vrf))
	if p == nil || p.handle == nil {
		return false
	}
	in, err := mg.o.SocketOf(p.handle).Info()
	return err == nil && in.PktGood > 0
}

// md5Session reports whether the peer's session is to be left alone as a
// TCP-MD5 one: the peer is a TCP-MD5 peer (or migrating) and its socket
// carries no TCP-AO. A migrating peer's session is managed as soon as it
// does (the far end reconnected with TCP-AO).
func (mg *migrations) md5Session(snap *keystore.Snapshot, info bgp.PeerInfo, h bgp.SocketHandle) bool {
	r, ok := mg.migrationOf(info.Neighbor, info.VRF)
	active := ok && r.Step.Active()
	pk, err := mg.recon.peerDesired(mg.policy(), snap, info.Neighbor, info.VRF, time.Now())
	if err != nil || (!md5Peer(pk) && !active) {
		return false
	}
	if ok && r.Step == migrate.Done {
		return false
	}
	if h != nil {
		if _, err := mg.o.SocketOf(h).Info(); err == nil {
			return false // it carries TCP-AO
		}
	}
	return true
}

// statusMigration is a record as control shows it.
func statusMigration(r migrate.Record) control.Migration {
	return control.Migration{Peer: r.Peer.Addr.String(), VRF: r.Peer.VRF, Step: string(r.Step), Prefix: r.Prefix.String(),
		At: r.At, Deadline: r.Deadline(), Since: r.Since, Reason: r.Reason}
}

// follow starts this end's migration of the link to peer when
// the far end (router, another aokeyd, through the fleet document) runs
// one: the same switch time and bound, so that the two ends switch
// together. Nothing happens when the peer is not a TCP-MD5 peer here,
// has a migration in progress or done, or rolled back this same one.
func (mg *migrations) follow(ctx context.Context, router string, addr netip.Addr, vrf string, at time.Time, bound time.Duration) {
	if mg.refuses(opMigrate) != nil {
		return
	}
	if r, ok := mg.migrationOf(addr, vrf); ok && (r.Step != migrate.RolledBack || r.At.Equal(at)) {
		return
	}
	snap, release := mg.shared()
	defer release()
	if snap == nil {
		return
	}
	pol := mg.policy()
	b, err := pol.BindingFor(addr, vrf)
	if err != nil || !b.Neighbor.IsSingleIP() {
		return
	}
	now := time.Now()
	if pk, err := pol.Desired(snap, addr, vrf, now); err != nil || !md5Peer(pk) {
		return
	}
	if _, err := mg.startMigration(snap, pol, mg.neighborhood(snap, pol, now), b, control.MigrateRequest{At: at, Bound: control.Duration(bound)}, now); err != nil {
		mg.log.Warn("the far end migrates the link to TCP-AO, this end cannot follow", "peer", peer.KeyOf(addr, vrf), "router", router, "err", err)
		return
	}
	mg.log.Info("migration to TCP-AO started to follow the far end's (fleet document)", "peer", peer.KeyOf(addr, vrf), "router", router, "at", at)
	mg.recon.resync()
}

// followWanted reports whether any peer could follow a far
// end's migration: a TCP-MD5 peer without a migration in progress or
// done. The fleet's documents are read for FollowMigration only then.
func (mg *migrations) followWanted() bool {
	if mg.refuses(opMigrate) != nil {
		return false // the speaker's kind migrates none (Caps.Migrate)
	}
	snap, release := mg.shared()
	defer release()
	if snap == nil {
		return false
	}
	if !anyMD5(snap) {
		return false // no TCP-MD5 password anywhere: no binding's policy is computed
	}
	pol, now := mg.policy(), time.Now()
	for _, b := range pol.Bindings() {
		if !b.Neighbor.IsSingleIP() {
			continue
		}
		if r, ok := mg.migrationOf(b.Neighbor.Addr(), b.VRF); ok && r.Step != migrate.RolledBack {
			continue
		}
		if pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now); err == nil && md5Peer(pk) {
			return true
		}
	}
	return false
}

// anyMD5 reports whether any chain of snap holds a TCP-MD5 password.
func anyMD5(snap *keystore.Snapshot) bool {
	for _, c := range snap.Chains {
		if c.MD5 != nil {
			return true
		}
	}
	return false
}
