package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// adopt is Daemon.Adopt (control.Backend): the keys for the peer that another
// agent installed (foreign keys, owned.go) on its session's socket and on
// the speaker's listeners become aokeyd's, recorded as adopted. From the
// next pass they are planned as aokeyd's own: kept while desired or
// carrying the session, retired otherwise, and a clashing one held back as
// an edit in place (aoctl replace). An explicit operator action: the one
// way a foreign key becomes aokeyd's to change.
//
// It takes exactly the keys of one prefix: the peer's host prefix, or the
// wider prefix req.Prefix names. A key of a wider prefix serves every
// neighbor inside it (a listener entry another agent keeps for a range of
// routers), and retiring it would strand those aokeyd does not manage; so
// without req.Prefix such keys are only listed (Left), and with it the
// adopt is refused while another neighbor relies on the prefix
// (adoptConflicts).
func (ow *ownership) adopt(ctx context.Context, req control.AdoptRequest) (control.AdoptResult, error) {
	addr, err := netip.ParseAddr(req.Peer)
	if err != nil {
		return control.AdoptResult{}, fmt.Errorf("%w: peer %q is not an IP address", control.ErrInvalid, req.Peer)
	}
	addr = addr.Unmap()
	if _, err := ow.policy().BindingFor(addr, req.VRF); err != nil {
		return control.AdoptResult{}, fmt.Errorf("peer %s: %v: %w", addr, err, control.ErrNotFound)
	}
	idx, err := ifIndex(req.VRF)
	if err != nil {
		return control.AdoptResult{}, fmt.Errorf("%w: %v", control.ErrInvalid, err)
	}
	want := hostPrefix(addr)
	if req.Prefix != "" {
		if want, err = ow.adoptPrefix(ctx, addr, req); err != nil {
			return control.AdoptResult{}, err
		}
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
		obs, err := rotator.Observe(ow.o.SocketOf(h), rotator.ReadFull)
		if err != nil {
			return fmt.Errorf("read the %s: %w", where, err)
		}
		o := ow.led.owner(ref.PID)
		for _, k := range obs.Keys {
			if !k.Peer.Contains(addr) || k.IfIndex != idx || o.Owns(k) {
				continue
			}
			if k.Peer.Masked() == want {
				all = append(all, found{ref, o, k, where})
			} else {
				res.Left = append(res.Left, control.AdoptedKey{Socket: where, Prefix: k.Peer.String(), SendID: k.SendID, RecvID: k.RecvID})
			}
		}
		return nil
	}
	if p := ow.table.peer(peer.KeyOf(addr, req.VRF)); p != nil && p.handle != nil {
		if err := look(p.handle, "session"); err != nil {
			return res, err
		}
	}
	hs, err := ow.tracker.Listeners(ctx)
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
		ow.led.record(f.o.p, f.ref.Cookie, k.KeyRef, k.Fingerprint, true)
		res.Adopted = append(res.Adopted, control.AdoptedKey{Socket: f.at, Prefix: k.Peer.String(), SendID: k.SendID, RecvID: k.RecvID})
		ow.log.Warn("foreign key adopted: aokeyd may now change or retire it", "peer", addr, "vrf", req.VRF,
			"socket", f.ref.String(), "send_id", k.SendID, "recv_id", k.RecvID)
	}
	if len(res.Adopted) > 0 {
		ow.led.adopted()
		if err := ow.led.flush(); err != nil {
			return res, fmt.Errorf("adopted, but the ownership record cannot be written (the adoption is lost at a restart): %w", err)
		}
	}
	ow.recon.askFull()
	return res, nil
}

// adoptPrefix checks req.Prefix, a prefix the operator names to adopt its
// keys: it must contain the peer, and no other neighbor of the speaker in
// the peer's VRF may rely on it: none inside it may have an established
// session (its socket may carry the key), and none inside it may be one
// that no binding of the policy covers (aokeyd does not manage it, so
// nothing would give it a key once the prefix's were retired).
func (ow *ownership) adoptPrefix(ctx context.Context, addr netip.Addr, req control.AdoptRequest) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(req.Prefix)
	if err != nil {
		return p, fmt.Errorf("%w: prefix %q: %v", control.ErrInvalid, req.Prefix, err)
	}
	p = p.Masked()
	if !p.Contains(addr) {
		return p, fmt.Errorf("%w: prefix %s does not contain the peer %s", control.ErrInvalid, p, addr)
	}
	peers, err := ow.o.Speaker.Peers(ctx)
	if err != nil {
		return p, fmt.Errorf("the speaker's neighbors (to check that no other one relies on %s): %w", p, err)
	}
	var uses []string
	for _, n := range peers {
		a := n.Neighbor.Unmap()
		if n.VRF != req.VRF || a == addr || !p.Contains(a) {
			continue
		}
		_, berr := ow.policy().BindingFor(a, n.VRF)
		switch {
		case n.State == bgp.StateEstablished:
			uses = append(uses, a.String()+" (established)")
		case berr != nil:
			uses = append(uses, a.String()+" (not managed by aokeyd)")
		}
	}
	if len(uses) > 0 {
		slices.Sort(uses)
		return p, fmt.Errorf("%w: prefix %s is used by other neighbors: %s; its keys stay foreign (adopting them would let aokeyd retire a key those sessions rely on)",
			control.ErrInvalid, p, strings.Join(uses, ", "))
	}
	return p, nil
}
