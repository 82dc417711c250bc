package daemon

import (
	"context"
	"net/netip"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The reconciler's side of a revoke: the listeners are the reconcile
// goroutine's alone, so the revocation service (revoke.go) hands it the
// listener part of each revoke (askListenerRevoke) and run applies it
// between two passes (revokeListeners).

// listenerRevoke is a revoke's listener part: the key goes from
// the listening sockets, all of its entries of the chain's bindings
// (inChain), or with scope only the peer's own (host prefix, vrf's
// device). The reconcile goroutine, the listeners' one writer, applies it
// between two passes (run) and closes done.
type listenerRevoke struct {
	ctx     context.Context
	inChain map[listenerEntry]bool
	chain   string // the key source's chain, for the interface neighbours' entries (linkEntries)
	key     revokedKey
	scope   netip.Addr
	vrf     string
	add     func(control.RevokeSocket)
	done    chan struct{}
}

// askListenerRevoke hands r to the reconcile goroutine and waits until it
// is applied. A daemon that is not running (or stops first) applies
// nothing: the revocation is recorded, and the next pass's listener sync
// deletes the key (a revoked key is never kept).
func (rc *reconciler) askListenerRevoke(ctx context.Context, r *listenerRevoke) {
	r.done = make(chan struct{})
	select {
	case rc.revokes <- r:
		<-r.done
	case <-ctx.Done():
		r.add(control.RevokeSocket{Socket: "listeners", Error: "the revoke ended before the reconcile loop took it: " + ctx.Err().Error()})
	case <-rc.done:
		r.add(control.RevokeSocket{Socket: "listeners", Error: "aokeyd is stopping: the listeners keep the key until the next start's first pass"})
	}
}

// revokeListeners applies r (the reconcile goroutine's). An entry of a
// prefix binding that covers the scoped peer stays: other peers use it;
// the outcome says so.
func (rc *reconciler) revokeListeners(r *listenerRevoke) {
	rc.linkEntries(r.chain, r.inChain)
	inChain, scope, add := r.inChain, r.scope, r.add
	idx, idxErr := ifIndex(r.vrf)
	hs, err := rc.tracker.Listeners(r.ctx)
	if err != nil {
		add(control.RevokeSocket{Socket: "listeners", Error: err.Error()})
		return
	}
	for _, h := range hs {
		name := "listen " + h.Ref().Local.String()
		// One borrow of the listener's descriptor for its read and all
		// its deletes (a borrow is a pidfd_getfd round trip), one read
		// (candidates) and one Deleter: its in-use check (a TCP_AO_INFO)
		// holds for the batch once it finds no Current_key or RNext_key.
		err := tcpao.Batch(rc.o.SocketOf(h), func(s tcpao.Socket) error {
			dl := &tcpao.Deleter{S: s, NoAsync: rc.syncListenerDeletes()}
			keys, err := r.candidates(s)
			if err != nil {
				if !isNoAO(err) {
					add(control.RevokeSocket{Socket: name, Error: err.Error()})
				}
				return nil
			}
			for _, k := range keys {
				if scope.IsValid() && !k.Peer.Contains(scope) {
					continue
				}
				if !inChain[listenerEntry{k.Peer, k.IfIndex}] {
					continue // another chain's key with the same IDs
				}
				if scope.IsValid() && idxErr == nil && k.IfIndex != idx {
					continue
				}
				if scope.IsValid() && k.Peer != hostPrefix(scope) {
					add(control.RevokeSocket{Socket: name, Peer: k.Peer.String(), Action: control.ActionKept,
						Error: "this listener key for " + k.Peer.String() + " serves other peers too: a peer-scoped revoke leaves it; revoke without --peer to remove it"})
					continue
				}
				rs := control.RevokeSocket{Socket: name, Peer: k.Peer.String(), Action: control.ActionDeleted}
				if _, same := r.key.is(k); !same {
					rc.revs.otherMaterial(&rs, k)
					add(rs)
					continue
				}
				if err := dl.Delete(tcpao.DelKey{KeyRef: k.KeyRef, Async: true}); err != nil {
					rs.Error = err.Error()
				}
				add(rs)
			}
			return nil
		})
		if err != nil {
			add(control.RevokeSocket{Socket: name, Error: err.Error()})
		}
	}
}
