package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// execRevoke is revokeSockets when the daemon serves an Executor: the
// revocation is recorded already (revoke), so the lists planned now leave
// the key out; the covered peers' lists (those whose binding reads chain,
// the scoped peer alone when scope is set) are planned and submitted at
// once, then the revoke waits in its own goroutine (the request's; never
// the pass) for the executor to apply them (an outcome of their
// generation: execApplyWait at most) and on Executor.Clean, and adds one
// result per covered peer: deleted, or the error that kept the key (the
// speaker's refusal, the lists not applied in time, a socket that still
// holds it).
func (rv *revocations) execRevoke(ctx context.Context, chain string, rk revokedKey, scope scopedPeer, add func(control.RevokeSocket)) (wait func()) {
	pol := rv.policy()
	begun := time.Now()
	covered, gen, _ := rv.recon.execSubmit(ctx, func(id peer.Key) bool {
		if scope.IsValid() && id != scope.key {
			return false
		}
		return readsChain(pol, id, chain)
	}, true)
	ex := rv.o.Executor
	seen, _ := rv.recon.execView()
	submitted := time.Now()
	return func() {
		out, applied := ExecOutcome{Gen: gen}, true
		if gen > 0 {
			wctx, cancel := context.WithTimeout(ctx, execApplyWait)
			out, applied = rv.recon.execApplied(wctx, gen)
			cancel()
		}
		appliedAt := time.Now()
		dirty, err := ex.Clean(ctx, covered, ExecRef(rk.ids[0], rk.ids[1]))
		// Where the revoke's time went: the lists' plans (the speaker's
		// files and sessions read), the executor's application (its
		// check and reconfigure, out.Timing, after any it was running)
		// and the wait for clean sockets.
		rv.log.Info("keys revoked through the executor", "executor", ex.Name(), "chain", chain, "peers", len(covered),
			"plan_ms", submitted.Sub(begun).Milliseconds(), "apply_ms", appliedAt.Sub(submitted).Milliseconds(), "application_ms", out.Timing.Milliseconds(),
			"clean_ms", time.Since(appliedAt).Milliseconds())
		for _, id := range covered {
			rs := control.RevokeSocket{Socket: execWhere(ex, id, seen[id]), Peer: id.Addr.String(), Action: control.ActionDeleted}
			switch {
			case !applied:
				rs.Action, rs.Error = control.ActionError, fmt.Sprintf("%s did not apply the list without the key within %v", ex.Name(), execApplyWait)
			case out.Failed[id] != nil:
				rs.Action, rs.Error = control.ActionError, fmt.Sprintf("%s refused the list without the key: %v", ex.Name(), out.Failed[id])
			case out.ConfigureErr != nil:
				rs.Action, rs.Error = control.ActionError, fmt.Sprintf("%s was not reconfigured: %v", ex.Name(), out.ConfigureErr)
			case err != nil:
				rs.Action, rs.Error = control.ActionError, err.Error()
			case dirty[id]:
				rs.Action, rs.Error = control.ActionError, fmt.Sprintf("a %s socket still holds key %d/%d for %s", ex.Name(), rk.ids[0], rk.ids[1], id)
			}
			add(rs)
		}
	}
}

// execApplyWait bounds a revoke's wait for the executor to apply its
// lists (its check of the speaker's configuration and the reconfigure).
const execApplyWait = 30 * time.Second

// execWhere names peer id's list for the operator: the executor's name
// for it (ExecObserved.Where), else the executor's and the peer's.
func execWhere(ex Executor, id peer.Key, ob ExecObserved) string {
	if ob.Where != "" {
		return ob.Where
	}
	return ex.Name() + " " + id.String()
}
