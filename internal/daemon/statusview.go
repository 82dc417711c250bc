package daemon

import (
	"slices"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

// speakerView fills in what the speaker reports of the neighbor for
// people, as its own CLI shows it: AS, description, flaps, and when and why
// the session last went down.
func speakerView(ps *control.PeerStatus, info bgp.PeerInfo) {
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

// SetConfigWarnings replaces the warnings about the configuration that
// status shows: the settings a reload (SIGHUP) could not apply, each
// waiting for a restart.
func (d *Daemon) SetConfigWarnings(w []string) {
	c := slices.Clone(w)
	d.configWarn.Store(&c)
}
