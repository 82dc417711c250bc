package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/connectguard"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The listen guard's side of the daemon. Under aokeyd exec the connect
// guard's supervisor holds each listen(2) of the speaker on the BGP port
// and asks ListenKeys to key the socket before the listen proceeds: a
// listener that never listened without its keys takes no unsigned SYN
// from a peer that signs, where one keyed by the listener watch did for
// about a second (lwatch.go). Invariants:
//
//   - One implementation: the socket is keyed by a listener sync
//     (syncListeners, with the socket as a held one), the reconcile
//     goroutine's, the listeners' one writer, with the desired keys and
//     TCP-MD5 passwords every listener of the speaker gets, planned by
//     the same planner. The listener watch's pass that follows, which
//     finds the new listener, plans nothing for it: the planner is
//     idempotent.
//   - Never unkeyed: an ask that arrives before the first full pass with
//     keys (no snapshot read yet) waits for it (rec.asks), however long;
//     the first full pass's sync answers it.
//   - Fail closed: ListenKeys answers nil only when the sync ran on the
//     socket without an error and no binding whose keys belong on it had
//     keys that could not be computed (a missing chain: they would be
//     missing on the listener, and its peer's unsigned SYN taken).
//   - Never touch what is not ours, never a socket nobody waits on: the
//     socket is reached through the supervisor's duplicate, valid only
//     while ListenKeys runs. An ask ListenKeys gave up on (its context
//     ended) before the reconcile goroutine claimed it is never claimed;
//     one claimed is keyed to the end before ListenKeys returns.

// errStopping answers a listen when aokeyd stops before keying it.
var errStopping = errors.New("aokeyd is stopping: the listener was not keyed")

// listenAsk is one ListenKeys call, handed to the reconcile goroutine.
type listenAsk struct {
	h    *heldListener
	done chan struct{} // closed when answered

	mu      sync.Mutex
	claimed bool // the reconcile goroutine keys the socket: wait for done
	gaveUp  bool // ListenKeys returned: never claim it
	err     error
}

// claim takes the ask for a sync; false when ListenKeys gave up on it.
func (a *listenAsk) claim() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gaveUp {
		return false
	}
	a.claimed = true
	return true
}

// giveUp withdraws an ask not claimed yet (true); false: it is being keyed,
// and done is closed when that ends.
func (a *listenAsk) giveUp() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.claimed {
		return false
	}
	a.gaveUp = true
	return true
}

// answer records the outcome of a claimed ask, the first one only.
func (a *listenAsk) answer(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done:
		return
	default:
	}
	a.err = err
	close(a.done)
}

// heldListener is the handle of a socket held in listen(2): the
// supervisor's duplicate, named as sock_diag will list it once it listens.
type heldListener struct {
	ref sockets.Ref
	fd  int
}

func (h *heldListener) Ref() sockets.Ref               { return h.ref }
func (h *heldListener) Do(fn func(fd int) error) error { return fn(h.fd) }

// listenKeys is the connect guard's Listen (connectguard.ListenFunc): it
// keys the socket l of the speaker, held in its listen(2) on the BGP port,
// as a listener before the listen proceeds, and says whether that was
// done. A socket on another port is none of aokeyd's: nil, untouched. It
// waits while aokeyd has read no keys yet, until ctx ends.
func (rc *reconciler) listenKeys(ctx context.Context, l connectguard.ListenSocket) error {
	if l.Local.Port() != rc.o.ListenPort {
		return nil
	}
	a := &listenAsk{done: make(chan struct{}), h: &heldListener{fd: l.Dup, ref: sockets.Ref{
		PID: l.PID, Inode: l.Inode, Cookie: l.Cookie, FD: l.FD, Local: l.Local, BoundDev: l.BoundDev,
		Listening: true, // keyed as the listener it becomes
	}}}
	select {
	case rc.listens <- a:
	case <-ctx.Done():
		return ctx.Err()
	case <-rc.done:
		return errStopping
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		if a.giveUp() {
			return ctx.Err()
		}
		<-a.done // a sync is keying it: the duplicate stays open until it ends
	}
	return a.err
}

// serveListen takes an ask between passes (the reconcile goroutine's): it
// is keyed at once by a listener sync when a full pass has computed the
// listeners' desired keys, else it waits for the first full pass.
func (rc *reconciler) serveListen(ctx context.Context, a *listenAsk) {
	if !rc.haveLast {
		rc.log.Info("a listener held in its listen() waits for aokeyd's first pass with keys", "socket", a.h.ref.String())
		rc.asks = append(rc.asks, a)
		return
	}
	rc.syncListeners(ctx, a)
}

// takeAsks returns the asks waiting for a full pass and forgets them.
func (rc *reconciler) takeAsks() []*listenAsk {
	as := rc.asks
	rc.asks = nil
	return as
}

// dropAsks answers the asks still waiting when Run returns.
func (rc *reconciler) dropAsks() {
	for _, a := range rc.takeAsks() {
		if a.claim() {
			a.answer(errStopping)
		}
	}
}

// claimAsks are the asks a sync keys: those ListenKeys still waits on.
func claimAsks(as []*listenAsk) []*listenAsk {
	out := as[:0:0]
	for _, a := range as {
		if a.claim() {
			out = append(out, a)
		}
	}
	return out
}

// missingOn is why the keys of some binding that belong on the listener
// ref are not in the listeners' desired keys (a frozen binding whose keys
// could not be computed), "" when none is: the bindings of its address
// family (an IPv6 listener with no IPv4 one takes the IPv4 peers too) and,
// on a listener bound to a VRF's device, of that VRF, as listenerWantOf
// picks the keys.
func missingOn(frozen []frozenRange, ref sockets.Ref, have4 bool) string {
	var why []string
	v4 := ref.Local.Addr().Unmap().Is4()
	for _, f := range frozen {
		if !f.missing {
			continue
		}
		is4 := f.keys.Prefix.Addr().Is4()
		if on := (v4 && is4) || (!v4 && (!is4 || !have4)); !on {
			continue
		}
		if ref.BoundDev != 0 && !f.keys.AnyDevice && f.keys.IfIndex != ref.BoundDev {
			continue
		}
		why = append(why, fmt.Sprintf("binding %s: %s", f.binding, f.why))
	}
	return strings.Join(why, "; ")
}

// unlistened is the TCP-AO and TCP-MD5 surface of a socket held in
// listen(2). The kernel shows a socket's TCP-MD5 keys through sock_diag,
// which lists listeners and connections only, so a socket bound and not
// listening yet shows none: its keys read as none (gobgpd and FRR set a
// neighbor's password on their listeners after listen(); and aokeyd
// refuses a neighbor with the speaker's own password). Everything else
// passes through.
type unlistened struct{ tcpao.Socket }

func (u unlistened) MD5Keys() ([]tcpao.MD5Info, error) { return nil, nil }
func (u unlistened) AddMD5(k tcpao.MD5Key) error       { return tcpao.AddMD5(u.Socket, k) }
func (u unlistened) DelMD5(r tcpao.MD5Ref) error       { return tcpao.DelMD5(u.Socket, r) }

// listenerSocket is the socket of a listener the listener sync writes.
func (rc *reconciler) listenerSocket(h bgp.SocketHandle) tcpao.Socket {
	s := rc.o.SocketOf(h)
	if _, ok := h.(*heldListener); ok {
		return unlistened{s}
	}
	return s
}
