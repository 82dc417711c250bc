package daemon

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// execRevoke is revokeSockets when the daemon serves an Executor: the
// revocation is recorded already (revoke), so the lists planned now leave
// the key out; the covered peers' lists (those whose binding reads chain,
// the scoped peer alone when scope is set) are planned and submitted at
// once, then the revoke waits on Executor.Clean in its own goroutine (the
// request's; never the pass) and adds one result per covered peer.
func (rv *revocations) execRevoke(ctx context.Context, chain string, rk revokedKey, scope netip.Addr, vrf string, add func(control.RevokeSocket)) (wait func()) {
	pol := rv.policy()
	covered := rv.recon.execSubmit(ctx, func(id peer.Key) bool {
		if scope.IsValid() && (id.Addr != scope || id.VRF != vrf) {
			return false
		}
		return readsChain(pol, id.Addr, id.VRF, chain)
	}, true)
	ex := rv.o.Executor
	seen, _ := rv.recon.execView()
	return func() {
		dirty, err := ex.Clean(ctx, covered, tcpao.KeyRef{Peer: execAnyPeer, SendID: rk.ids[0], RecvID: rk.ids[1]})
		for _, id := range covered {
			rs := control.RevokeSocket{Socket: execWhere(ex, id, seen[id]), Peer: id.Addr.String(), Action: control.ActionDeleted}
			switch {
			case err != nil:
				rs.Action, rs.Error = control.ActionError, err.Error()
			case dirty[id]:
				rs.Action, rs.Error = control.ActionError, fmt.Sprintf("a %s socket still holds key %d/%d for %s", ex.Name(), rk.ids[0], rk.ids[1], id)
			}
			add(rs)
		}
	}
}

// execWhere names peer id's list for the operator: the executor's name
// for it (ExecObserved.Where), else the executor's and the peer's.
func execWhere(ex Executor, id peer.Key, ob ExecObserved) string {
	if ob.Where != "" {
		return ob.Where
	}
	return ex.Name() + " " + id.String()
}
