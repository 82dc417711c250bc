package daemon

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/rotator"
)

// What the never-strand rule keeps (rotator.PlanSocket) is said loudly:
// a key kept because it carries a session although the desired state no
// longer wants it (its lifetime ended, it left the key source), and new
// material held back under an installed key's IDs, each get a log line
// when they appear, a status warning naming the key and what to do, the
// aokeyd_keys_kept series and an alert rule that fires at once.

// noteListenerKept records what the last listener sync kept, logging each
// kept key once when it appears. The reconcile goroutine calls it.
func (rc *reconciler) noteListenerKept(kept []rotator.Held) {
	rc.mu.Lock()
	old := rc.kept
	rc.kept = kept
	rc.mu.Unlock()
	for _, h := range kept {
		if slices.ContainsFunc(old, func(o rotator.Held) bool { return o.Ref == h.Ref && o.Why == h.Why }) {
			continue
		}
		rc.log.Warn("listener key kept by the never-strand rule", "key", h.Ref.String(), "reason", h.Why.String(), "detail", h.Detail)
	}
}

// keysChanged is a session's keys changed (a machine's Changed: a roll
// retired an old key). When the listener keeps keys only because sessions
// carry them, the keys carried may have changed too, and the next
// listener sync, not the next resync, lets them go. A change during a
// sync that read the sessions before it is that sync's to see
// (carriedChangedDuring).
func (rc *reconciler) keysChanged() {
	rc.keyChanges.Add(1)
	if rc.listenerCarries() {
		rc.resync()
	}
}

// carriedChangedDuring asks for the next listener sync when the sync
// that read the sessions' keys at change count ch0 kept a key because a
// session carries it, and a session's keys changed since that read: the
// change's own keysChanged saw the sync before (which may have kept
// nothing) and asked for none. Without it such a key stayed until the
// next resync (a fleet-wide roll of 1,024 peers in the guest: 898 keys
// for 18 s, the roll's last done at 27.7 s against its machines' 9.3 s).
func (rc *reconciler) carriedChangedDuring(ch0 uint64) {
	if rc.keyChanges.Load() != ch0 && rc.listenerCarries() {
		rc.resync()
	}
}

// listenerCarries reports whether the last listener sync kept a key only
// because a session carries it.
func (rc *reconciler) listenerCarries() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.ContainsFunc(rc.kept, func(h rotator.Held) bool { return h.Why == rotator.ReasonCarried })
}

// listenerKept is what the last listener sync kept.
func (rc *reconciler) listenerKept() []rotator.Held {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.kept
}

// keptWarning is the status warning for a key kept on a socket of peer
// (sock names it): the key's chain and name when the source has them, why
// it is kept and what to do.
func keptWarning(h rotator.Held, sock string, names map[[2]uint8]keyName, now time.Time) string {
	what := fmt.Sprintf("key send=%d recv=%d", h.Ref.SendID, h.Ref.RecvID)
	n, known := names[[2]uint8{h.Ref.SendID, h.Ref.RecvID}]
	if known {
		what = fmt.Sprintf("key %s/%s (send=%d recv=%d)", n.chain, n.mkt.Name, h.Ref.SendID, h.Ref.RecvID)
	}
	switch h.Why {
	case rotator.ReasonEdited:
		return fmt.Sprintf("%s was edited in place in the key source (new secret, algorithm, MAC length or tcp_options under the same IDs): the new material is held back and the installed key stays on the %s; give the new material new IDs and let aokeyd roll to it, or approve it with `aoctl replace` (the session resets)", what, sock)
	case rotator.ReasonForeign:
		// Not named from the key source: its IDs may be a key's there.
		what = fmt.Sprintf("key send=%d recv=%d", h.Ref.SendID, h.Ref.RecvID)
		return fmt.Sprintf("%s on the %s was not installed by aokeyd (an operator's setsockopt, or a speaker that keys its own sockets): aokeyd keeps it and never changes it; `aoctl adopt PEER` hands it to aokeyd (which may then retire it). If the speaker installs TCP-AO keys itself (BIRD, GoBGP 4.10+ keychains), let it: drive it through its own interface (speaker type bird), not by borrowing its sockets", what, sock)
	case rotator.ReasonForeignClash:
		return fmt.Sprintf("%s cannot be installed on the %s: another agent installed a key under the same IDs, which aokeyd never deletes or changes, so the peer's roll waits; give the key other IDs in the key source, remove the foreign key, or `aoctl adopt PEER` it (its new material is then held back as an edit in place)", what, sock)
	case rotator.ReasonCarried:
		why := "is no longer in the key source"
		if known {
			why = "is no longer desired"
			if end := n.mkt.AcceptLifetime.End; !end.IsZero() && !now.Before(end) {
				why = fmt.Sprintf("is past its lifetime (accept end %s)", end.UTC().Format(time.RFC3339))
			}
		}
		return fmt.Sprintf("%s %s but the session uses it (or the peer last authenticated with it): it is kept on the %s so that the session and its next reconnect survive; add a successor key now (aokeyd rolls to it), or revoke the key to drop the session", what, why, sock)
	}
	return fmt.Sprintf("%s kept on the %s (%s): %s", what, sock, h.Why, h.Detail)
}

// listenerKeptFor are the listener's kept keys that cover peer's session
// keys (same L3 device, the key's prefix holds the address).
func listenerKeptFor(kept []rotator.Held, p bgp.PeerInfo) []rotator.Held {
	var out []rotator.Held
	idx, _ := ifIndex(p.VRF)
	for _, h := range kept {
		if h.Ref.IfIndex == idx && h.Ref.Peer.Contains(p.Neighbor.Unmap()) {
			out = append(out, h)
		}
	}
	return out
}

// metricKept is the aokeyd_keys_kept series: each peer's session keys
// kept (from its machine's status) and the listeners' (labelled with the
// key's peer prefix).
func metricKept(sts []*rotator.Status, peerOf func(rotator.PeerID) *peerState, listener []rotator.Held) []metrics.Kept {
	var out []metrics.Kept
	for _, s := range sts {
		p := peerOf(s.Peer)
		if p == nil {
			continue
		}
		for _, h := range s.Kept {
			out = append(out, metrics.Kept{Peer: p.info.Neighbor.String(), VRF: p.info.VRF, Socket: rotator.Established.String(),
				SendID: h.Ref.SendID, RecvID: h.Ref.RecvID, Reason: h.Why.String()})
		}
	}
	for _, h := range listener {
		peer := h.Ref.Peer.String()
		if h.Ref.Peer.IsSingleIP() {
			peer = h.Ref.Peer.Addr().String()
		}
		vrf := ""
		if h.Ref.IfIndex != 0 {
			if ifi, err := net.InterfaceByIndex(h.Ref.IfIndex); err == nil {
				vrf = ifi.Name
			}
		}
		out = append(out, metrics.Kept{Peer: peer, VRF: vrf, Socket: rotator.Listening.String(),
			SendID: h.Ref.SendID, RecvID: h.Ref.RecvID, Reason: h.Why.String()})
	}
	return out
}

// keptWarnings are peer's warnings for the keys kept on its session's
// socket (rs.Kept) and on the listener for its address.
func keptWarnings(rs rotator.Status, listener []rotator.Held, names map[[2]uint8]keyName, now time.Time) []string {
	type kept struct {
		h     rotator.Held
		where string
	}
	var all []kept
	for _, h := range rs.Kept {
		all = append(all, kept{h, "session's socket"})
	}
	for _, h := range listener {
		i := slices.IndexFunc(all, func(k kept) bool {
			return k.h.Why == h.Why && k.h.Ref.SendID == h.Ref.SendID && k.h.Ref.RecvID == h.Ref.RecvID
		})
		if i >= 0 {
			all[i].where = "session's socket and the listener"
			continue
		}
		all = append(all, kept{h, "listener"})
	}
	var out []string
	for _, k := range all {
		out = append(out, keptWarning(k.h, k.where, names, now))
	}
	return out
}
