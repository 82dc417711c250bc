package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

// peerTable is the session part: what the speaker reported of each peer,
// and the speaker's session events (it is the tracker's
// bgp.SessionObserver) that write it. It alone holds mu and m; the passes
// read it through peer and peerList, forget takes a peer out with remove,
// and a reader that must see it unchanged for a while (the roll events'
// metrics, the verify scrape) holds it through read. A *peerState is never
// modified once published (updatePeer replaces it).
type peerTable struct {
	*core
	mu sync.Mutex
	m  map[rotator.PeerID]*peerState
	// hand runs the take-overs of new sessions (handover.go).
	hand handovers
}

// peerState is what the speaker reported of one managed peer: its session
// and the socket handle. Its desired keys, and whether a machine runs on
// the session, are the rotation controller's (SetDesired, Runs). Published
// values are never modified: updatePeer replaces them, so readers need no
// lock once they hold one.
type peerState struct {
	id rotator.PeerID
	// info is the speaker's report of the session, read-only: the
	// tracker's own where it has one (bgp.SessionInfo), else a copy;
	// never nil once published (noInfo).
	info    *bgp.PeerInfo
	binding *policy.Binding  // the policy's own (BindingRef), read-only; nil before the session's first report
	handle  bgp.SocketHandle // nil while the session is down
}

// peer returns the peer's current state. A *peerState is never modified
// once published (updatePeer replaces it), so the caller may read it
// without holding the table's lock.
func (pt *peerTable) peer(id rotator.PeerID) *peerState {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.m[id]
}

// peerList returns every peer's current state (read-only, see peer).
func (pt *peerTable) peerList() []*peerState {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := make([]*peerState, 0, len(pt.m))
	for _, p := range pt.m {
		out = append(out, p)
	}
	return out
}

// updatePeer replaces the peer's state by a modified copy (creating it when
// missing) and returns the new one.
func (pt *peerTable) updatePeer(id rotator.PeerID, fn func(p *peerState)) *peerState {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var n peerState
	if old := pt.m[id]; old != nil {
		n = *old
	}
	n.id = id
	fn(&n)
	if n.info == nil {
		n.info = &noInfo
	}
	pt.m[id] = &n
	return &n
}

// noInfo is the info of a peer with no report yet (never written).
var noInfo bgp.PeerInfo

// sharedInfo is info as a peerState keeps it: the tracker's copy when h
// is the tracker's handle of that very report, else a copy of its own.
func sharedInfo(info bgp.PeerInfo, h bgp.SocketHandle) *bgp.PeerInfo {
	if h != nil {
		if p := bgp.SessionInfo(h); p != nil && *p == info {
			return p
		}
	}
	return &info
}

// read runs fn with the table held: fn must not call back into the table
// nor keep m.
func (pt *peerTable) read(fn func(m map[rotator.PeerID]*peerState)) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	fn(pt.m)
}

// remove takes the peer out of the table and returns what it held (nil
// when it was not there).
func (pt *peerTable) remove(id rotator.PeerID) *peerState {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	p := pt.m[id]
	delete(pt.m, id)
	return p
}

// OnEstablished implements bgp.SessionObserver: a managed peer's session is
// up on an accepted connection. Its keys are checked against the desired
// set (the del_async race) and its rotation machine starts, in a take-over
// that runs beside the speaker's next events (handovers).
func (pt *peerTable) OnEstablished(ctx context.Context, info bgp.PeerInfo, h bgp.SocketHandle) {
	id := info.Key()
	b, err := pt.bindingOf(info)
	if err != nil {
		return
	}
	if info.MD5 {
		// The kernel refuses TCP-AO next to TCP-MD5 on one socket: the
		// session is left alone (no handle, so no pass touches it).
		pt.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = sharedInfo(info, h), b, nil })
		pt.log.Error("refusing to manage the session: "+md5Fix(info.Neighbor), "peer", id)
		return
	}
	snap, release := pt.shared()
	defer release()
	if snap != nil && pt.migrs.md5Session(snap, info, h) {
		// A TCP-MD5 peer's session: an established TCP-MD5 connection
		// never takes a TCP-AO key (EISCONN), so no pass touches it.
		pt.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = sharedInfo(info, h), b, nil })
		pt.log.Info("session established on TCP-MD5: not managed", "peer", id, "socket", h.Ref().String())
		return
	}
	pt.updatePeer(id, func(p *peerState) { p.info, p.binding, p.handle = sharedInfo(info, h), b, h })
	pt.log.Info("session established", "peer", id, "socket", h.Ref().String())
	if snap == nil {
		// reconcile takes the session over after the first good read.
		pt.log.Warn("no key snapshot yet: not touching the new session until the first good read", "peer", id)
		pt.recon.resync()
		return
	}
	// Taken over beside the speaker's next events, not before them: see
	// handovers.
	pt.hand.start(id, func() { pt.handOver(id) })
}

// handoversEnded returns once every take-over started has ended.
func (pt *peerTable) handoversEnded() { pt.hand.wait() }

// handOver takes the peer's session over (takeOver, on the peer's latest
// state and a snapshot of its own) and wakes the pass when the session may
// be its peer's migration's.
func (pt *peerTable) handOver(id rotator.PeerID) {
	snap, release := pt.shared()
	defer release()
	if snap == nil || !pt.takeOver(snap, id) {
		pt.recon.resync() // the next pass retries
	}
	p := pt.peer(id)
	if p == nil {
		return
	}
	if r, ok := pt.migrs.migrationOf(p.info.Neighbor, p.info.VRF); ok && (r.Step == migrate.Prepared || r.Step == migrate.Switching) {
		pt.recon.wake() // the pass sees whether the new session is the migration's TCP-AO one
	}
}

// takeOver checks a session's keys against the desired set and starts its
// rotation machine, unless one already runs for this socket. It reports
// whether a machine runs on the session's socket now.
func (pt *peerTable) takeOver(snap *keystore.Snapshot, id rotator.PeerID) bool {
	p := pt.peer(id)
	if p == nil || p.handle == nil {
		return false
	}
	if pt.ctrl.Runs(id, p.handle) {
		return true
	}
	if r, ended := pt.early.session(id, sessionOf(p.handle), time.Now()); ended {
		pt.log.Info("aoctl rotate's early roll ends: the session it rolled went down before the roll completed; the schedule governs "+
			"(aoctl rotate asks again)", "peer", id, "key", r.label())
	}
	if pt.migrs.md5Session(snap, *p.info, p.handle) {
		pt.updatePeer(id, func(p *peerState) { p.handle = nil }) // as OnEstablished leaves it
		return true
	}
	desired, _, err := pt.recon.desiredFor(snap, p, time.Now())
	if err != nil {
		pt.log.Warn("no desired keys for peer", "peer", id, "err", err)
		return false
	}
	// The session event and a reconcile pass may both get here for the
	// same new session: the controller starts one machine.
	started, sp, err := pt.ctrl.Adopt(id, p.handle, pt.o.SocketOf(p.handle), desired)
	if !started {
		zeroDesired(desired)
		return true // taken over by the other caller
	}
	if err != nil {
		pt.log.Warn("checking the accepted socket's keys", "peer", id, "err", err)
	}
	if q := pt.peer(id); q == nil || q.handle != p.handle {
		// The session went down (or was replaced) while it was taken
		// over: OnDown clears the handle before it stops the machine,
		// so a machine adopted after that stop is stopped here, never
		// left running on a dead socket (its keys counted as carried, a
		// listener's edit held as in use: TestEditInPlaceCorrected).
		pt.ctrl.PeerDown(id)
		pt.log.Info("the session went down while it was taken over: its machine stopped", "peer", id)
		return true
	}
	if len(sp.Ops) > 0 {
		pt.log.Info("accepted socket corrected", "peer", id, "ops", len(sp.Ops))
	}
	pt.log.Info("rotation machine started", "peer", id)
	return true
}

// OnDown implements bgp.SessionObserver.
func (pt *peerTable) OnDown(ctx context.Context, info bgp.PeerInfo) {
	id := info.Key()
	// The handle first, then the machine: a take-over under way either
	// finds its machine stopped here or sees the handle gone after its
	// Adopt and stops what it started (takeOver).
	pt.mu.Lock()
	if old := pt.m[id]; old != nil {
		n := *old
		n.handle = nil
		pt.m[id] = &n
	}
	pt.mu.Unlock()
	pt.ctrl.PeerDown(id)
	pt.stat.noteRollDown(info)
	if r, ended := pt.early.down(id, time.Now()); ended {
		pt.log.Info("aoctl rotate's early roll ends with the session; the schedule governs (aoctl rotate asks again)", "peer", id, "key", r.label())
		pt.recon.wake() // the pass writes the record
	}
	pt.stat.noteDown(ctx, info)
	pt.mu.Lock()
	if old := pt.m[id]; old != nil {
		n := *old
		n.handle, n.info = nil, &info
		pt.m[id] = &n
	}
	pt.mu.Unlock()
	pt.log.Info("session down; its socket is no longer touched", "peer", id)
}

// md5Fix says why a neighbor with a TCP-MD5 password cannot carry TCP-AO
// keys and how to fix it, in each speaker's words.
func md5Fix(n netip.Addr) string {
	return fmt.Sprintf("neighbor %s has a TCP-MD5 password and a TCP-AO binding: the kernel refuses TCP-AO next to TCP-MD5 on one socket (EKEYREJECTED); "+
		"remove the password from the speaker (FRR: `no neighbor %s password`; gobgpd: the neighbor's auth-password) or the neighbor from aokeyd's policy", n, n)
}

// addrText is a's text, "" for the zero Addr (an interface neighbour's
// before it learned one).
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
