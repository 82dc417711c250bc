package birdnative

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// scope marks pk's keys revoked by the record (the daemon's one
// revocation record: global ones and those scoped to id) through the
// daemon's own rule (policy.PeerKeys.Revoke): removed from Keys, named in
// Revoked (so that the files drop them even in use), and Preferred chosen
// again by the policy's one preference rule, so that BIRD's end of a
// chain sends with the key the daemon's end does. A revoked key not due
// for the peer now is named in Revoked all the same: its file may still
// hold it.
func (d *Driver) scope(pk *policy.PeerKeys, snap *keystore.Snapshot, id peer.Key) {
	for _, name := range d.revoked.Revoked(pk.SourceChain, id) {
		if !pk.Revoke(name) && !slices.Contains(pk.Revoked, name) {
			pk.Revoked = append(pk.Revoked, name)
		}
	}
}

// revokeAsk is a revoke handed to the run loop, the files' one writer.
type revokeAsk struct {
	r revocation.Revocation
	// writeBack: mark the key revoked in the key source too (not for a
	// fleet revocation, whose record is the fleet's).
	writeBack bool
	// at is when the request came: Elapsed counts from it, the wait for
	// the driver's loop included.
	at   time.Time
	done chan revokeDone
}

type revokeDone struct {
	res control.RevokeResult
	err error
}

// Revoke implements control.Backend: the key is recorded revoked, every
// covered neighbor's file is rewritten without it (even in use: an
// explicit operator action), BIRD reconfigured, and each of BIRD's sockets
// read until none holds it. Elapsed is from the request to the last
// socket clean.
func (d *Driver) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	return d.revoke(ctx, req, true)
}

// RevokeFleet applies a fleet revocation (the fleet publisher's): as
// Revoke, without writing the key source.
func (d *Driver) RevokeFleet(ctx context.Context, chain, key string) (control.RevokeResult, error) {
	return d.revoke(ctx, control.RevokeRequest{Chain: chain, Key: key}, false)
}

func (d *Driver) revoke(ctx context.Context, req control.RevokeRequest, writeBack bool) (control.RevokeResult, error) {
	at := time.Now()
	r := revocation.Revocation{Chain: req.Chain, Key: req.Key, At: d.o.Now()}
	switch addr, err := netip.ParseAddr(req.Peer); {
	case req.Peer == "" && req.VRF != "":
		return control.RevokeResult{}, fmt.Errorf("vrf %q without a peer: a VRF scopes a peer-scoped revoke: %w", req.VRF, control.ErrInvalid)
	case req.Peer == "":
	case err != nil:
		return control.RevokeResult{}, fmt.Errorf("peer %q is not an IP address: %w", req.Peer, control.ErrInvalid)
	default:
		r.Peer = peer.KeyOf(addr, req.VRF)
	}
	a := revokeAsk{r: r, writeBack: writeBack, at: at, done: make(chan revokeDone, 1)}
	select {
	case d.revokes <- a:
	case <-ctx.Done():
		return control.RevokeResult{}, ctx.Err()
	}
	select {
	case r := <-a.done:
		return r.res, r.err
	case <-ctx.Done():
		return control.RevokeResult{}, ctx.Err()
	}
}

func (d *Driver) revokeNow(ctx context.Context, a revokeAsk) revokeDone {
	start, taken := a.at, time.Now()
	res := control.RevokeResult{Chain: a.r.Chain, Key: a.r.Key, Sockets: []control.RevokeSocket{}}
	if !a.r.Global() {
		res.Peer, res.VRF = a.r.Peer.Addr.String(), a.r.Peer.VRF
	}
	snap := d.o.Keys.Current()
	if snap == nil {
		return revokeDone{err: errors.New("no good key snapshot yet")}
	}
	c := snap.Chains[a.r.Chain]
	m, ok := keystore.MKT{}, false
	if c != nil {
		m, ok = c.Key(a.r.Key)
	}
	id := ids{m.SendID, m.RecvID}
	snap.Zero()
	if !ok {
		return revokeDone{err: fmt.Errorf("key %s/%s: %w", a.r.Chain, a.r.Key, control.ErrNotFound)}
	}
	// Record first (one outcome: recorded and in force, or nothing
	// changed), in the record every speaker reads.
	inForce, err := d.revoked.Add(a.r)
	if !inForce {
		return revokeDone{err: fmt.Errorf("the revocation could not be recorded, nothing was changed: %w", err)}
	}
	if err != nil {
		res.RecordError = err.Error()
		d.log.Error("the revocation is recorded and in force, but its record is not whole: check the disk", "err", err)
	}
	d.retryAt = time.Time{} // a revoke does not wait out a backoff
	var only map[peer.Key]bool
	if !a.r.Global() {
		only = map[peer.Key]bool{a.r.Peer: true}
	}
	recorded := time.Now()
	views := d.pass(ctx, only, false)
	applied := time.Now()
	// The key source is written beside the sockets' check, as the daemon
	// does: neither waits for the other.
	source := make(chan struct{})
	go func() {
		defer close(source)
		switch {
		case !a.r.Global():
			// The source is shared by every peer: a peer-scoped revoke
			// lives in aokeyd's record only.
		case !a.writeBack:
			// A fleet revocation: the fleet record in Vault holds it.
		case d.o.Source != nil:
			if err := d.o.Source.Revoke(ctx, a.r.Chain, a.r.Key); err != nil {
				res.SourceError = err.Error()
			} else {
				res.SourceRevoked = true
			}
		default:
			res.SourceError = "the key source cannot be written"
		}
	}()
	var covered []peerView
	for _, v := range views {
		if v.Names[id] == a.r.Chain+"/"+a.r.Key {
			covered = append(covered, v)
		}
	}
	peers := make([]peer.Key, 0, len(covered))
	for _, v := range covered {
		peers = append(peers, v.ID)
	}
	dirty, err := d.waitClean(ctx, peers, id)
	for _, v := range covered {
		rs := control.RevokeSocket{Socket: "bird " + v.File, Peer: v.ID.String(), Action: control.ActionDeleted}
		switch {
		case err != nil:
			rs.Action, rs.Error = control.ActionError, err.Error()
		case dirty[v.ID]:
			rs.Action, rs.Error = control.ActionError, fmt.Sprintf("a BIRD socket still holds key %d/%d for %s", id[0], id[1], v.ID)
		}
		res.Sockets = append(res.Sockets, rs)
	}
	res.Elapsed = control.Duration(time.Since(start))
	d.log.Info("BIRD keys revoked", "chain", a.r.Chain, "key", a.r.Key, "protocols", len(covered),
		"queued_ms", taken.Sub(start).Milliseconds(), "record_ms", recorded.Sub(taken).Milliseconds(), "files_and_configure_ms", applied.Sub(recorded).Milliseconds(),
		"plan_and_check_ms", d.timing.plan.Milliseconds(), "configure_ms", d.timing.configure.Milliseconds(),
		"clean_ms", time.Since(applied).Milliseconds())
	<-source
	return revokeDone{res: res}
}
