package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// core is what the parts share: the options, the logger, the rotation
// controller, the speaker tracker, the policy in force and the shared key
// snapshot, and a handle on each part. New wires it once; after New
// returns its fields are never assigned again. Every part embeds it, so a
// part reaches the shared services (each its own owner: the controller,
// the tracker, policyState swapped whole, snapshots under its lock) and
// the other parts; it reaches another part through that part's methods
// only, never its fields (parts_test.go checks).
type core struct {
	o       Options
	log     *slog.Logger
	ctrl    *rotator.Controller // each peer's desired keys and rotation machine
	tracker *bgp.Tracker        // the speaker's sessions and sockets
	pol     atomic.Pointer[policyState]
	snaps   snapshots // the shared read-only key snapshot (snapshots.go)

	// The parts, each the one owner of its state.
	recon *reconciler  // the passes, the listeners, the carried keys (reconcile.go)
	table *peerTable   // what the speaker reported; the session events (peers.go)
	revs  *revocations // the revocation service and its record (revoke.go)
	owns  *ownership   // the ledger of aokeyd's keys; adopt and replace claims (ownership.go)
	migrs *migrations  // the TCP-MD5 to TCP-AO migration controller (migrate.go)
	stat  *statusView  // status, plan's roll journal and the metrics view (backend.go)
	early *earlyRolls  // aoctl rotate's early rolls (early.go, rotate.go)
	conns *connector   // the keys of the speaker's own connects (connect.go)
}

func (co *core) policy() *policy.Policy { return co.pol.Load().pol }

// setPolicy swaps in the policy in force, whole (Daemon.SetPolicy).
func (co *core) setPolicy(p *policy.Policy) { co.pol.Store(newPolicyState(p)) }

// managed reports whether aokeyd keys p's sessions: a binding covers it
// (bindingOf).
func (co *core) managed(p bgp.PeerInfo) bool {
	_, err := co.bindingOf(p)
	return err == nil
}

// bindingOf is the binding that keys p's sessions (the policy's own, not
// to be modified): its address's; for an interface neighbour (issue 53)
// its link's, once it learned an address whose listener keys are that
// binding's (linkListenerDesired): an address an address binding covers
// is that binding's, and a neighbour refused its learned address (another
// link's neighbour holds it with another chain) is not keyed. It wraps
// policy.ErrNoBinding otherwise.
func (co *core) bindingOf(p bgp.PeerInfo) (*policy.Binding, error) {
	pol := co.policy()
	if !p.Link.IsValid() {
		return pol.BindingRef(p.Neighbor, p.VRF)
	}
	switch {
	case !p.Neighbor.IsValid():
		return nil, fmt.Errorf("%w: interface neighbour %s: no address learned yet", policy.ErrNoBinding, p.Shown())
	case co.recon.linkRefused(p.Key(), p.Neighbor):
		return nil, fmt.Errorf("%w: interface neighbour %s: its address is held by another link's neighbour with another key chain", policy.ErrNoBinding, p.Shown())
	}
	if _, err := pol.BindingFor(p.Neighbor, p.VRF); err == nil {
		return nil, fmt.Errorf("%w: interface neighbour %s: an address binding covers the address it learned", policy.ErrNoBinding, p.Shown())
	}
	return pol.BindingRefForKey(p.Key())
}

// refresh reads the key source once.
func (co *core) refresh(ctx context.Context) {
	changed, err := co.o.Keys.Refresh(ctx)
	switch {
	case err != nil:
		co.log.Warn("key source read failed; last good snapshot stays in force", "source", co.o.Keys.Status().Source, "err", err)
		if co.o.Metrics != nil {
			co.o.Metrics.KeySourceFailed()
		}
	default:
		if co.o.Metrics != nil {
			co.o.Metrics.KeySourceSynced(time.Now())
		}
		if changed {
			co.log.Info("key source changed", "source", co.o.Keys.Status().Source)
		}
	}
}

// snapshot returns a clone of the last good snapshot with the recorded
// revocations applied, or nil when there is none yet. The caller zeroes it.
func (co *core) snapshot() *keystore.Snapshot {
	s := co.o.Keys.Current()
	if s == nil {
		return nil
	}
	co.revs.Apply(s)
	return s
}

// boundChain reports whether a source chain is read by a key chain that
// some binding uses (the key cache holds only those back).
func (co *core) boundChain(chain string) bool { return co.pol.Load().bound[chain] }
