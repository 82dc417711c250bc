package daemon

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Adopt implements control.Backend: the keys for the peer that another
// agent installed (foreign keys, owned.go) on its session's socket and on
// the speaker's listeners become aokeyd's, recorded as adopted. From the
// next pass they are planned as aokeyd's own: kept while desired or
// carrying the session, retired otherwise, and a clashing one held back as
// an edit in place (aoctl replace). An explicit operator action: the one
// way a foreign key becomes aokeyd's to change.
func (d *Daemon) Adopt(ctx context.Context, req control.AdoptRequest) (control.AdoptResult, error) {
	addr, err := netip.ParseAddr(req.Peer)
	if err != nil {
		return control.AdoptResult{}, fmt.Errorf("%w: peer %q is not an IP address", control.ErrInvalid, req.Peer)
	}
	addr = addr.Unmap()
	if _, err := d.policy().BindingFor(addr, req.VRF); err != nil {
		return control.AdoptResult{}, fmt.Errorf("peer %s: %v: %w", addr, err, control.ErrNotFound)
	}
	idx, err := ifIndex(req.VRF)
	if err != nil {
		return control.AdoptResult{}, fmt.Errorf("%w: %v", control.ErrInvalid, err)
	}
	res := control.AdoptResult{Peer: addr.String(), VRF: req.VRF, Adopted: []control.AdoptedKey{}}
	// Every socket's foreign keys are found first, then recorded: a key
	// copied from the listener to the session is listed on both.
	type found struct {
		ref sockets.Ref
		o   *procOwner
		k   tcpao.KeyInfo
		at  string
	}
	var all []found
	look := func(h bgp.SocketHandle, where string) error {
		ref := h.Ref()
		obs, err := rotator.Observe(d.o.SocketOf(h), rotator.ReadFull)
		if err != nil {
			return fmt.Errorf("read the %s: %w", where, err)
		}
		o := d.owned.owner(ref.PID)
		for _, k := range obs.Keys {
			if k.Peer.Contains(addr) && k.IfIndex == idx && !o.Owns(k) {
				all = append(all, found{ref, o, k, where})
			}
		}
		return nil
	}
	if p := d.peer(peer.KeyOf(addr, req.VRF)); p != nil && p.handle != nil {
		if err := look(p.handle, "session"); err != nil {
			return res, err
		}
	}
	hs, err := d.tracker.Listeners(ctx)
	if err != nil {
		return res, fmt.Errorf("the speaker's listeners: %w", err)
	}
	for _, h := range hs {
		if b := h.Ref().BoundDev; b != 0 && b != idx {
			continue // another VRF's listener
		}
		if err := look(h, "listener "+h.Ref().Local.String()); err != nil {
			return res, err
		}
	}
	for _, f := range all {
		k := f.k
		d.owned.record(f.o.p, f.ref.Cookie, k.KeyRef, k.Fingerprint, true)
		res.Adopted = append(res.Adopted, control.AdoptedKey{Socket: f.at, Prefix: k.Peer.String(), SendID: k.SendID, RecvID: k.RecvID})
		d.log.Warn("foreign key adopted: aokeyd may now change or retire it", "peer", addr, "vrf", req.VRF,
			"socket", f.ref.String(), "send_id", k.SendID, "recv_id", k.RecvID)
	}
	if len(res.Adopted) > 0 {
		d.owned.adopted()
		if err := d.owned.flush(); err != nil {
			return res, fmt.Errorf("adopted, but the ownership record cannot be written (the adoption is lost at a restart): %w", err)
		}
	}
	d.Kick()
	return res, nil
}
