package daemon

import (
	"fmt"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// execView is what the last pass observed of the executor's peers and the
// last outcome of its Run (nil, zero: no pass yet, or no Executor).
func (rc *reconciler) execView() (map[peer.Key]ExecObserved, ExecOutcome) {
	if rc.exec == nil {
		return nil, ExecOutcome{}
	}
	rc.exec.mu.Lock()
	defer rc.exec.mu.Unlock()
	return rc.exec.seen, rc.exec.outcome
}

// execStatus is status when the daemon serves an Executor: each peer's
// session as the speaker reports it, the keys of its session as the
// kernel holds them (read, never written), and what the last pass and
// the last application found. peerArg "" is every peer.
func (sv *statusView) execStatus(peerArg string) (control.StatusReport, error) {
	now := time.Now()
	cs := sv.o.Keys.Status()
	rep := control.StatusReport{GeneratedAt: now, Speaker: sv.o.Executor.Name(), Peers: []control.PeerStatus{},
		KeySource: control.KeySourceStatus{Name: cs.Source, LastSync: cs.LastGood, Age: control.Duration(cs.Age),
			Stale: !cs.HaveSnapshot || cs.Age > sv.o.StaleAfter}}
	if cs.LastError != nil {
		rep.KeySource.LastError = cs.LastError.Error()
	}
	if w := sv.revs.Warning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	rep.Warnings = append(rep.Warnings, sv.early.warnings()...)
	seen, out := sv.recon.execView()
	if out.ConfigureErr != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s was not reconfigured: %v: every list was put back", sv.o.Executor.Name(), out.ConfigureErr))
	}
	ids := make([]peer.Key, 0, len(seen))
	for id := range seen {
		if peerArg == "" || peerArg == id.Addr.String() || peerArg == id.String() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, peer.Key.Compare)
	for _, id := range ids {
		ob := seen[id]
		// The speaker keys its own connects as its listener: its active
		// opens are always keyed.
		ps := control.PeerStatus{Peer: id.Addr.String(), VRF: id.VRF, SessionState: "unknown", Sockets: []control.Socket{}, Keys: []control.Key{},
			Warnings: slices.Clone(ob.Warnings), ActiveOpensKeyed: true,
			Rotation: control.Rotation{State: "native", NextAction: sv.o.Executor.Name() + " sends with the preferred key of " + execWhere(sv.o.Executor, id, ob)}}
		if p := ob.Protocol; p != nil {
			ps.SessionState = bgp.ParseSessionState(p.BGPState).String()
			ps.Counters = control.Counters{PktGood: p.PktGood, PktBad: p.PktBad}
			ps.LastDownReason = p.LastError
		}
		if ob.Unread != nil {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("the session could not be read from the kernel: %v: no key leaves its list until it can be", ob.Unread))
		}
		if err := out.Failed[id]; err != nil {
			ps.Warnings = append(ps.Warnings, fmt.Sprintf("its list was refused: %v: left as it was", err))
		}
		ps.Warnings = append(ps.Warnings, out.Warnings[id]...)
		if ob.Session != nil {
			for _, k := range ob.Session.Keys {
				ps.Keys = append(ps.Keys, control.Key{SendID: k.SendID, RecvID: k.RecvID, Alg: string(k.Algorithm), MACLen: k.MACLen,
					Current: k.IsCurrent, RNext: k.IsRNext, PktGood: k.PktGood, PktBad: k.PktBad, State: control.KeyInstalled})
			}
		}
		rep.Peers = append(rep.Peers, ps)
	}
	if peerArg != "" && len(rep.Peers) == 0 {
		return rep, fmt.Errorf("peer %q: %w", peerArg, control.ErrNotFound)
	}
	return rep, nil
}

// execRefuses is why what (an aoctl command) is refused when the daemon
// serves an Executor: it works on sockets aokeyd keys, and the speaker
// keys its own (nil: no Executor, served).
func (co *core) execRefuses(what string) error {
	if co.o.Executor == nil {
		return nil
	}
	return fmt.Errorf("%s: speaker %s keys its own sockets: %w", what, co.o.Executor.Name(), control.ErrInvalid)
}
