package daemon

import (
	"slices"
	"sync/atomic"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// statusView is the status and metrics part: it answers aoctl status and
// rolls (backend.go, statusone.go, rolls.go), publishes the rotator's roll
// events and each scrape to the metrics (rollEvent, observeMetrics), and
// keeps the verify view (verify.go). Its fields are its own: what the
// metrics already hold of each peer, so that a scrape updates only what
// changed (observeMetrics's alone, but for verify: session events note
// bases); each peer's last roll steps; the reload's warnings. The roll's
// state and counts are not kept here: the rotator's events publish them.
type statusView struct {
	*core
	scraped map[*peerState]*scraped
	scrapes uint64 // observeMetrics passes
	verify  verifyBase
	// contact are the peers never up whose verify gauges the last scrape
	// published (they have no peer state).
	contact map[rotator.PeerID]bool
	rolls   rollJournal // each peer's last roll steps (rolls.go)
	// configWarn names the settings a reload could not apply.
	configWarn atomic.Pointer[[]string]
}

// lastRoll is the sequence number of the last roll step journaled.
func (sv *statusView) lastRoll() uint64 { return sv.rolls.last() }

// forgetRolls drops a forgotten peer's roll steps.
func (sv *statusView) forgetRolls(id rotator.PeerID) { sv.rolls.forget(id) }

// forgetPeer drops what the view holds of a peer forgotten, with its
// metric series when it was in the peer table (had): after the table let
// it go, so that no roll event publishes a series again (rollEvent).
func (sv *statusView) forgetPeer(id rotator.PeerID, had bool) {
	sv.verify.forget(id)
	if had && sv.o.Metrics != nil {
		sv.o.Metrics.DeletePeer(metricPeer(id))
	}
}

// speakerView fills in what the speaker reports of the neighbor for
// people, as its own CLI shows it: AS, description, flaps, and when and why
// the session last went down.
func speakerView(ps *control.PeerStatus, info bgp.PeerInfo) {
	// An interface neighbour is its interface, with the address it
	// learned ("" before one).
	ps.Peer, ps.Interface = addrText(info.Neighbor), info.Link.Name()
	ps.PeerAS, ps.Flaps, ps.Description = info.PeerASN, info.Flops, info.Description()
	ps.LastDown, ps.LastDownReason = info.LastDown()
}

// keysInUse names the key the session sends with and the key the peer
// sends with, from the kernel's Current_key and RNext_key as ps.Keys holds
// them (read from the session's socket), and the roll's state: while a
// roll waits for the peer to take the key it announced, the peer still
// sends with the RNext_key before.
func keysInUse(ps *control.PeerStatus, rs rotator.Status) {
	find := func(match func(control.Key) bool) *control.KeyName {
		for _, k := range ps.Keys {
			if match(k) {
				return &control.KeyName{Chain: k.Chain, Name: k.Name, SendID: k.SendID, RecvID: k.RecvID}
			}
		}
		return nil
	}
	ps.Sending = find(func(k control.Key) bool { return k.Current })
	ps.PeerSending = find(func(k control.Key) bool { return k.RNext })
	if from := rs.AnnouncedFrom; rs.State == rotator.StateAnnounced && from.Valid && ps.PeerSending != nil && ps.PeerSending.RecvID != from.ID {
		ps.PeerAsked = ps.PeerSending
		ps.PeerSending = find(func(k control.Key) bool { return k.RecvID == from.ID })
	}
}

// setConfigWarnings replaces the warnings about the configuration that
// status shows: the settings a reload (SIGHUP) could not apply, each
// waiting for a restart.
func (sv *statusView) setConfigWarnings(w []string) {
	c := slices.Clone(w)
	sv.configWarn.Store(&c)
}
