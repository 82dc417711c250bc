package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/chainview"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

var _ control.Backend = (*Daemon)(nil)

// keyName maps installed keys back to the MKTs they came from.
type keyName struct {
	chain string
	mkt   keystore.MKT
}

func mktIndex(snap *keystore.Snapshot, chain string) map[[2]uint8]keyName {
	out := map[[2]uint8]keyName{}
	if snap == nil {
		return out
	}
	if c := snap.Chains[chain]; c != nil {
		for _, m := range c.Keys {
			out[[2]uint8{m.SendID, m.RecvID}] = keyName{chain: chain, mkt: m}
		}
	}
	return out
}

// status is Daemon.Status (control.Backend).
func (sv *statusView) status(ctx context.Context, peer string) (control.StatusReport, error) {
	if sv.o.Executor != nil {
		return sv.execStatus(ctx, peer)
	}
	now := time.Now()
	cs := sv.o.Keys.Status()
	rep := control.StatusReport{
		GeneratedAt: now,
		Speaker:     sv.o.Speaker.Name(),
		KeySource: control.KeySourceStatus{
			Name: cs.Source, LastSync: cs.LastGood, Age: control.Duration(cs.Age),
			Stale: !cs.HaveSnapshot || cs.Age > sv.o.StaleAfter,
		},
	}
	if cs.LastError != nil {
		rep.KeySource.LastError = cs.LastError.Error()
	}
	om := sv.recon.optMem()
	rep.Optmem = control.Optmem{Limit: om.limit, Needed: om.needed}
	// Stale-source, optmem and not-passive warnings are derived from these
	// fields (StatusReport.Complete, below).
	snap, release := sv.shared()
	defer release()
	for _, h := range sv.recon.holds(snap) {
		rep.KeySource.Held = append(rep.KeySource.Held, heldKey(h))
		rep.Warnings = append(rep.Warnings, holdWarning(h))
	}
	if w := sv.revs.Warning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	if w := sv.owns.warning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	rep.Warnings = append(rep.Warnings, sv.early.warnings()...)
	if w := sv.configWarn.Load(); w != nil {
		rep.Warnings = append(rep.Warnings, *w...)
	}
	rep.Warnings = append(rep.Warnings, sv.recon.linkWarnings()...)
	rep.ListenerFaults = sv.recon.listenerFaults() // their warnings: rep.Complete
	rep.StartUpGate = sv.recon.startUpGate()
	if k := sv.o.Kernel; k.Release != "" {
		rep.Kernel = k.Status() // its defects' warnings: rep.Complete
		for _, p := range snap.RefusedAlgorithms(k.Algorithms, k.Release) {
			rep.Warnings = append(rep.Warnings, p.Error())
		}
	}

	var infos []bgp.PeerInfo
	var err error
	if peer == "" {
		infos, err = sv.speakerPeers(ctx)
	} else {
		infos, err = sv.speakerPeer(ctx, peer)
	}
	if err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("speaker %s unreachable: %v", sv.o.Speaker.Name(), err))
		infos = infos[:0]
		for _, p := range sv.table.peerList() {
			infos = append(infos, *p.info)
		}
	}
	rot := sv.rotationStatus(peer, infos)
	// The listeners are found once (a sock_diag dump and a scan of the
	// speaker's descriptors) for the sockets list and the verify view.
	var listeners []control.Socket
	hs, _ := sv.tracker.Listeners(ctx)
	for _, h := range hs {
		r := h.Ref()
		listeners = append(listeners, control.Socket{Kind: control.KindListen, Local: r.Local.String(), Inode: r.Inode})
	}
	verify := sv.verifyViewer(hs, infos, peer != "")
	found := false
	for _, info := range infos {
		id := info.Key()
		if peer != "" && !namedBy(info, peer) {
			continue
		}
		if !sv.managed(info) {
			if peer != "" {
				return rep, unmanagedErr(sv.core, info, peer)
			}
			continue
		}
		found = true
		rep.Peers = append(rep.Peers, verify(sv.peerStatus(snap, info, rot[id], listeners, now), info))
	}
	if peer != "" && !found {
		return rep, fmt.Errorf("peer %s: %w", peer, control.ErrNotFound)
	}
	if peer == "" {
		rep.Chains = chainview.Chains(sv.policy(), snap, now)
	}
	rep.Complete()
	return rep, nil
}

// statusListWait bounds how long status waits for the speaker's neighbor
// list: a speaker that does not answer (about one of its neighbors, say)
// makes status fall back to the neighbors the daemon tracks, with a
// warning, instead of hanging.
const statusListWait = 2 * time.Second

// speakerPeers is Speaker.Peers, waited for no longer than statusListWait
// even when the speaker does not heed its context.
func (sv *statusView) speakerPeers(ctx context.Context) ([]bgp.PeerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, statusListWait)
	defer cancel()
	type answer struct {
		ps  []bgp.PeerInfo
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		ps, err := sv.o.Speaker.Peers(ctx)
		ch <- answer{ps, err}
	}()
	select {
	case a := <-ch:
		return a.ps, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no neighbor list within %s: %w", statusListWait, ctx.Err())
	}
}

func (sv *statusView) peerStatus(snap *keystore.Snapshot, info bgp.PeerInfo, rs rotator.Status, listeners []control.Socket, now time.Time) control.PeerStatus {
	id := info.Key()
	ps := control.PeerStatus{
		VRF: info.VRF, SessionState: info.State.String(),
		Passive: info.Passive, ActiveOpensKeyed: sv.conns.keysActiveOpens(info), Sockets: slices.Clone(listeners),
	}
	if info.Established() && !info.Uptime.IsZero() {
		ps.Uptime = control.Duration(now.Sub(info.Uptime).Truncate(time.Second))
	}
	if info.Established() && info.Local.IsValid() {
		ps.Local = info.Local.Unmap().String()
	}
	speakerView(&ps, info)
	if info.MD5 {
		ps.Warnings = append(ps.Warnings, md5Fix(info.Neighbor))
	}
	var h bgp.SocketHandle
	if p := sv.table.peer(id); p != nil {
		h = p.handle
	}

	var pk policy.PeerKeys
	if snap != nil {
		var err error
		pk, err = sv.recon.desiredOf(sv.policy(), snap, info, now)
		if err != nil {
			ps.Warnings = append(ps.Warnings, "policy: "+err.Error())
		} else if snap.Degraded(pk.SourceChain) {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("key chain %s: %v", pk.SourceChain, errFrozen))
		}
	}
	mr, migrating := sv.migrs.migrationOf(info.Neighbor, info.VRF)
	if migrating {
		m := statusMigration(mr)
		ps.Migration = &m
		if mr.Step == migrate.RolledBack {
			ps.Warnings = append(ps.Warnings, "migration to TCP-AO rolled back: "+mr.Reason+"; aoctl migrate starts it again")
		}
	}
	// What the session runs is read from its socket; the desired state
	// says what a peer that is down will run.
	sessionAO := false
	if h != nil {
		_, err := sv.o.SocketOf(h).Info()
		sessionAO = err == nil
	}
	ps.Auth = control.AuthNone
	switch {
	case migrating && (mr.Step == migrate.Prepared || mr.Step == migrate.Switching):
		ps.Auth = control.AuthMigrating + " (" + string(mr.Step) + ")"
	case sessionAO:
		ps.Auth = control.AuthAO
	case info.Established() && h == nil && (info.MD5 || md5Peer(pk)):
		ps.Auth = control.AuthMD5 // a TCP-MD5 session is left alone: it has no handle
	case migrating && mr.Step == migrate.Done:
		ps.Auth = control.AuthAO
	case info.MD5 || md5Peer(pk):
		ps.Auth = control.AuthMD5
	case len(pk.Keys) > 0:
		ps.Auth = control.AuthAO
	}
	if migrating && mr.Step == migrate.Done && md5Peer(pk) {
		ps.Warnings = append(ps.Warnings, migratedMD5Warning(pk.SourceChain))
	}
	ps.Warnings = append(ps.Warnings, sv.recon.md5Warnings(info.Neighbor)...)
	if md5Peer(pk) && (!migrating || !mr.Step.Active()) {
		pk.Keys = nil // none of the chain's TCP-AO keys is installed for a TCP-MD5 peer
	}
	names := mktIndex(snap, pk.SourceChain)
	desired := map[[2]uint8]policy.ScheduledKey{}
	for _, k := range pk.Keys {
		desired[[2]uint8{k.MKT.SendID, k.MKT.RecvID}] = k
	}
	// A peer this process never saw up is warned of too: after a restart
	// the listener keeps what its last session carried (carried.go).
	ps.Warnings = append(ps.Warnings, keptWarnings(rs, listenerKeptFor(sv.recon.listenerKept(), info), names, now)...)
	ps.Edits = editStatus(rs.Edits, sv.recon.listenerEditsFor(info), names)
	ps.Rotation = control.Rotation{State: string(rs.State), Since: rs.Since, NextAction: rs.NextAction, NextAt: rs.NextAt,
		Waiting: rs.Waiting, LastAbortReason: rs.LastAbortReason.String(), LastAbort: rs.LastAbort}
	ps.EarlyRoll = sv.early.status(id, now)
	if rs.HavePending {
		if n, ok := names[[2]uint8{rs.Pending.SendID, rs.Pending.RecvID}]; ok {
			ps.Rotation.PendingKey = n.chain + "/" + n.mkt.Name
		} else {
			ps.Rotation.PendingKey = rs.Pending.String()
		}
	}
	if h == nil {
		if ps.Rotation.State == "" {
			ps.Rotation.State = string(rotator.StateDown)
		}
		for _, k := range pk.Keys {
			ps.Keys = append(ps.Keys, statusKey(pk.SourceChain, k.MKT, k.SendLifetime, k.AcceptLifetime, control.KeyPending))
		}
		return ps
	}
	r := h.Ref()
	ps.Sockets = append(ps.Sockets, control.Socket{Kind: control.KindEstablished, Local: r.Local.String(), Remote: r.Remote.String(), Inode: r.Inode})
	obs, err := rotator.Observe(sv.o.SocketOf(h), rotator.ReadBare)
	if err != nil {
		ps.Warnings = append(ps.Warnings, "reading the session's TCP-AO state: "+err.Error())
		return ps
	}
	ps.Counters = control.Counters{PktGood: obs.Info.PktGood, PktBad: obs.Info.PktBad, PktKeyNotFound: obs.Info.PktKeyNotFound,
		PktAORequired: obs.Info.PktAORequired, PktDroppedICMP: obs.Info.PktDroppedICMP}
	ps.Keys = sessionKeys(obs.Keys, names, desired, pk.Revoked, rs)
	keysInUse(&ps, rs)
	if obs.Info.PktBad > 0 {
		ps.Warnings = append(ps.Warnings, fmt.Sprintf("%d segments failed TCP-AO verification", obs.Info.PktBad))
	}
	return ps
}

// sessionKeys is the status of each key on a session's socket: named from
// the key source, with the policy's lifetimes where the policy wants it,
// and its state (installed, pending, retiring or revoked).
func sessionKeys(keys []tcpao.KeyInfo, names map[[2]uint8]keyName, desired map[[2]uint8]policy.ScheduledKey, revoked []string, rs rotator.Status) []control.Key {
	var out []control.Key
	for _, ki := range keys {
		ids := [2]uint8{ki.SendID, ki.RecvID}
		n, known := names[ids]
		dk, want := desired[ids]
		state := control.KeyInstalled
		switch {
		case known && (n.mkt.Revoked || slices.Contains(revoked, n.mkt.Name)):
			state = control.KeyRevoked
		case !want:
			state = control.KeyRetiring
		case rs.HavePending && rs.Pending.SendID == ki.SendID && rs.Pending.RecvID == ki.RecvID:
			state = control.KeyPending
		}
		k := control.Key{SendID: ki.SendID, RecvID: ki.RecvID, Alg: string(ki.Algorithm), MACLen: ki.MACLen, TCPOptions: control.TCPOptions(ki.ExcludeOptions),
			Current: ki.IsCurrent, RNext: ki.IsRNext, PktGood: ki.PktGood, PktBad: ki.PktBad, State: state}
		if known {
			k.Chain, k.Name = n.chain, n.mkt.Name
			k.SendLifetime = control.Lifetime{Start: n.mkt.SendLifetime.Start, End: n.mkt.SendLifetime.End}
			k.AcceptLifetime = control.Lifetime{Start: n.mkt.AcceptLifetime.Start, End: n.mkt.AcceptLifetime.End}
		}
		if want {
			k.SendLifetime = control.Lifetime{Start: dk.SendLifetime.Start, End: dk.SendLifetime.End}
			k.AcceptLifetime = control.Lifetime{Start: dk.AcceptLifetime.Start, End: dk.AcceptLifetime.End}
		}
		out = append(out, k)
	}
	return out
}

func statusKey(chain string, m keystore.MKT, send, accept keystore.Lifetime, state string) control.Key {
	return control.Key{Chain: chain, Name: m.Name, SendID: m.SendID, RecvID: m.RecvID, Alg: string(m.Algorithm), MACLen: m.MACLen,
		TCPOptions:   control.TCPOptions(!m.IncludeTCPOptions),
		SendLifetime: control.Lifetime{Start: send.Start, End: send.End}, AcceptLifetime: control.Lifetime{Start: accept.Start, End: accept.End},
		State: state}
}

// observeMetrics publishes per-peer series; it runs on each metrics scrape
// (metrics.OnCollect). A session's kernel counters come from the rotation
// machine's last read of its socket (every steady re-read and roll poll
// publishes them with its status); only a session whose counters are stale
// (older than two steady periods, or never read: a machine stuck in a
// call, or not started) is read here. A peer whose machine published no
// new status since the last scrape (and whose session did not change)
// costs nothing more: its series hold what the last scrape put there, and
// the metrics serve the counters' age from their read time. Peers that are
// gone lost their series when they went (forget).
func (sv *statusView) observeMetrics() {
	m := sv.o.Metrics
	if m == nil {
		return
	}
	if sv.o.Executor != nil {
		sv.observeExecMetrics(m)
		return
	}
	// The controller's status first: its goroutines take  (through the
	// session guard) while they hold their own lock.
	sts := sv.ctrl.Snapshots()
	om := sv.recon.optMem()
	m.SetOptmem(om.limit, om.needed)
	snap, release := sv.shared()
	defer release()
	m.SetHeldBack(metricHolds(sv.recon.holds(snap)))
	m.SetKept(metricKept(sts, sv.table.peer, sv.recon.listenerKept()))
	sv.scrapes++
	sv.observeVerify(m)
	now := time.Now()
	pol := sv.policy()
	fresh := 2 * sv.ctrl.Config().Steady
	var kcs []metrics.KeyCounters // reused: ObserveKeys keeps none of it
	for _, s := range sts {
		p := sv.table.peer(s.Peer)
		if p == nil {
			continue
		}
		e := sv.scrapedFor(p)
		sv.observeCoverage(m, p, e, pol, snap, now)
		if e.status != s {
			// A new snapshot: most (every steady re-read) change only
			// the counters. The roll's state and counts come as events
			// (rollEvent), not from here.
			e.status = s
			ids := scrapedIDs{cur: s.Current, rnext: s.RNext, installed: s.Desired}
			if p.handle != nil && (!e.idsSet || e.ids != ids) {
				var cur, rn *uint8
				if s.Current.Valid {
					cur = &s.Current.ID
				}
				if s.RNext.Valid {
					rn = &s.RNext.ID
				}
				m.SetPeerKeys(e.mp, cur, rn, ids.installed)
				e.ids, e.idsSet = ids, true
			}
		}
		if p.handle == nil {
			continue
		}
		c := s.Counters
		if c.At.IsZero() || now.Sub(c.At) > fresh {
			obs, err := rotator.Observe(sv.o.SocketOf(p.handle), rotator.ReadBare)
			if err != nil {
				continue
			}
			c = rotator.CountersOf(obs, now)
		} else if c.At.Equal(e.countersAt) {
			continue // published by an earlier scrape
		}
		e.countersAt = c.At
		kcs = publishCounters(m, e.mp, c, kcs[:0])
	}
	for p, e := range sv.scraped {
		if e.pass != sv.scrapes {
			delete(sv.scraped, p)
		}
	}
}

// scrapedIDs are the parts of a status SetPeerKeys publishes.
type scrapedIDs struct {
	cur, rnext rotator.OptID
	installed  int
}

// scrapedFor returns what the metrics hold of p, marked seen by this
// scrape. Entries are by peer state: one that was replaced (a new session,
// new desired keys) starts over, and the old one goes at the end of the
// scrape.
func (sv *statusView) scrapedFor(p *peerState) *scraped {
	if sv.scraped == nil {
		sv.scraped = map[*peerState]*scraped{}
	}
	e := sv.scraped[p]
	if e == nil {
		e = &scraped{mp: metricPeer(p.id)}
		sv.scraped[p] = e
	}
	e.pass = sv.scrapes
	return e
}

// scraped is what the metrics hold of one peer, as the last scrape put it
// there (observeMetrics alone uses it, one scrape at a time).
type scraped struct {
	mp         metrics.Peer    // its labels
	status     *rotator.Status // the machine's snapshot published
	countersAt time.Time       // the read time of the counters published
	ids        scrapedIDs      // the key IDs published
	idsSet     bool
	verify     verifyCause // the verify-failing and key-not-found values published
	verifySet  bool
	// The send-key coverage end published, and the policy and key
	// snapshot it was computed from.
	covEnd  time.Time
	covPol  *policy.Policy
	covSnap *keystore.Snapshot
	pass    uint64 // the last scrape that saw the peer
}

// observeCoverage publishes when p's keys leave it with nothing to send
// with (policy.SendCoverageEnd), recomputed only when the policy or the
// key snapshot changed or that instant has come; e is p's record.
func (sv *statusView) observeCoverage(m *metrics.Metrics, p *peerState, e *scraped, pol *policy.Policy, snap *keystore.Snapshot, now time.Time) {
	if pol == nil || snap == nil {
		return
	}
	if e.covPol == pol && e.covSnap == snap && (e.covEnd.IsZero() || now.Before(e.covEnd)) {
		return
	}
	e.covPol, e.covSnap = pol, snap
	chainKeys := pol.ChainKeys
	if p.info.Link.IsValid() {
		chainKeys = func(snap *keystore.Snapshot, _ netip.Addr, vrf string) (policy.Binding, []policy.ScheduledKey, error) {
			return pol.ChainKeysOnLink(snap, p.info.Link.Name(), vrf)
		}
	}
	if _, keys, err := chainKeys(snap, p.info.Neighbor, p.info.VRF); err == nil {
		e.covEnd = policy.SendCoverageEnd(keys, now)
		m.SetSendCoverageEnd(e.mp, e.covEnd)
	}
}

// publishCounters exports one session's counters and their read time; kcs
// is scratch space, returned for the next session.
func publishCounters(m *metrics.Metrics, mp metrics.Peer, c rotator.Counters, kcs []metrics.KeyCounters) []metrics.KeyCounters {
	for _, k := range c.Keys {
		// Key left empty: the metrics name the key "SendID/RecvID".
		kcs = append(kcs, metrics.KeyCounters{SendID: k.SendID, RecvID: k.RecvID, PktGood: k.PktGood, PktBad: k.PktBad})
	}
	m.ObserveSession(mp, metrics.SocketCounters{PktGood: c.PktGood, PktBad: c.PktBad,
		PktKeyNotFound: c.PktKeyNotFound, PktAORequired: c.PktAORequired}, kcs, c.At)
	return kcs
}

// rollEvent publishes one roll event of the rotator's to the metrics,
// as it happens: the attempts, their outcomes (an abort under its own
// reason), the state and the failed-attempts gauge. A peer forgotten is
// left alone: its series went with it (forget deletes them after taking
// it out of the table, and this holds the table's lock while it
// publishes).
func (sv *statusView) rollEvent(e rotator.Event) {
	sv.rolls.event(e)
	if r, why, ended := sv.early.event(e); ended {
		sv.log.Warn("aoctl rotate's early roll ends; the schedule governs (aoctl rotate asks again)", "peer", e.Peer, "key", r.label(), "why", why)
		sv.recon.wake() // the peer's desired state goes back to the schedule's
	} else if sv.early.pending() {
		sv.recon.wake() // a roll held: the pass writes the record
	}
	m := sv.o.Metrics
	if m == nil {
		return
	}
	sv.table.read(func(peers map[rotator.PeerID]*peerState) {
		if peers[e.Peer] == nil {
			return
		}
		mp := metricPeer(e.Peer)
		switch e.Kind {
		case rotator.EventState:
			m.SetRotationState(mp, string(e.State))
		case rotator.EventRollStarted:
			m.RotationStarted(mp)
		case rotator.EventRollAborted:
			m.RotationAborted(mp, e.Reason.String())
		case rotator.EventRollCompleted:
			m.RotationCompleted(mp)
		}
		m.SetRollAttempts(mp, e.Attempts, e.LastAbortReason.String())
	})
}

// metricPeer is a peer's metric labels: its identity as text, at the edge
// (an interface neighbour's is its interface: its address may change).
func metricPeer(id rotator.PeerID) metrics.Peer {
	return metrics.Peer{Addr: id.Name(), VRF: id.VRF}
}

func isNoAO(err error) bool {
	return errors.Is(err, errNoEnt)
}
