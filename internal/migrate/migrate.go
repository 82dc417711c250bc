// Package migrate is the TCP-MD5 to TCP-AO migration of one BGP session
// (issue 34), as a small state machine aokeyd's daemon advances once per
// pass, and the record it keeps of it across restarts.
//
// The kernel's rules it is built on (tcpao's md5/ conformance cases, both
// kernels): a listener refuses a TCP-AO key for an address its MD5 key
// covers and an MD5 key where TCP-AO covers the address, but takes a
// TCP-AO key for a prefix whose first address lies outside the MD5 key;
// the peer may then connect with either kind and never unsigned. So a
// migration puts the peer's TCP-AO keys on the listener at such a
// covering prefix (Prefix) beside its MD5 key, and the session moves to
// TCP-AO when the far end reconnects with it, without a moment in which
// the listener would take an unsigned SYN from the peer.
//
// Steps, for the side that accepts the peer's connection:
//
//	prepared   TCP-AO at Prefix beside the MD5 key on the listener, the
//	           MD5 session untouched; the far end is told (aoctl
//	           peer-config --migrate) to switch at At.
//	switching  At has passed: waiting for the far end's TCP-AO session.
//	done       a session of the peer ran TCP-AO (pkt_good rose): the MD5
//	           key leaves the listener; the peer's keys stay at Prefix.
//	rolled-back  no TCP-AO session by At+Bound, or no TCP-AO key left to
//	           send with (an operator revoked it): the TCP-AO keys leave
//	           the listener, TCP-MD5 stays as it was; not tried again
//	           until an operator asks.
//
// The MD5 key never leaves before TCP-AO carried a session, and the
// listener always holds one of the two kinds for the peer: rotator/model/
// migrate.pml checks both with spin, the far end switching at any moment
// or never, the key source failing, the deadline passing and a revoke of
// the TCP-AO key (mutant_md5_early.pml: the MD5 key leaving at the switch
// time breaks them).
package migrate

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

// Step is a migration's state.
type Step string

// The steps.
const (
	Prepared   Step = "prepared"
	Switching  Step = "switching"
	Done       Step = "done"
	RolledBack Step = "rolled-back"
)

// Active reports whether the peer's TCP-AO keys are on the listener
// (at Prefix) in this step.
func (s Step) Active() bool { return s == Prepared || s == Switching || s == Done }

// DefaultBound is how long after the switch time a TCP-AO session may
// take to come up before the migration rolls back: a few hold times (90 s
// each by default) and a connect retry.
const DefaultBound = 5 * time.Minute

// Record is one peer's migration.
type Record struct {
	// Peer is the migrating peer, written in its text form ("10.0.0.2",
	// "10.0.0.2 vrf red"); a record written before that kept the VRF in
	// a field of its own, vrf, which UnmarshalJSON still reads.
	Peer peer.Key `json:"peer"`
	// Prefix is where the peer's TCP-AO keys sit on the listener: a
	// prefix covering the peer whose first address is not the peer's
	// (Covering).
	Prefix netip.Prefix `json:"prefix"`
	// At is the agreed switch time; Bound how long after it the TCP-AO
	// session may take.
	At    time.Time     `json:"at"`
	Bound time.Duration `json:"bound"`
	Step  Step          `json:"step"`
	// Since is when Step was entered; Reason why it was (a roll-back's).
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// recordFields is Record without its methods.
type recordFields Record

// UnmarshalJSON reads a record in its own form, or in the one aokeyd
// wrote before the peer was one field (peer.ParseWithVRF): an upgrade
// loses no migration.
func (r *Record) UnmarshalJSON(b []byte) error {
	w := struct {
		Peer string `json:"peer"`
		VRF  string `json:"vrf"`
		*recordFields
	}{recordFields: (*recordFields)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	k, err := peer.ParseWithVRF(w.Peer, w.VRF)
	if err != nil {
		return err
	}
	r.Peer = k
	return nil
}

// Deadline is when a migration without a TCP-AO session rolls back.
func (r Record) Deadline() time.Time { return r.At.Add(r.Bound) }

// Observed is what a pass saw of the peer.
type Observed struct {
	// AOSession: an established session of the peer carries TCP-AO and
	// has verified segments with it (pkt_good > 0).
	AOSession bool
	// NoAOKey: the peer has no TCP-AO key to send with any more (revoked,
	// or its lifetime over): the migration cannot complete.
	NoAOKey bool
}

// Advance is one step of the machine at now: the record as it is to be
// (the same when nothing changes).
func Advance(r Record, o Observed, now time.Time) Record {
	switch r.Step {
	case Prepared, Switching:
		switch {
		case o.NoAOKey:
			r.Step, r.Since = RolledBack, now
			r.Reason = fmt.Sprintf("%s has no TCP-AO key to send with any more (revoked, or its lifetime over): TCP-MD5 kept", r.Peer.Addr)
		case o.AOSession:
			r.Step, r.Since, r.Reason = Done, now, ""
		case !now.Before(r.Deadline()):
			r.Step, r.Since = RolledBack, now
			r.Reason = fmt.Sprintf("no TCP-AO session from %s within %s of the switch time %s: TCP-MD5 kept",
				r.Peer.Addr, r.Bound, r.At.UTC().Format(time.RFC3339))
		case r.Step == Prepared && !now.Before(r.At):
			r.Step, r.Since = Switching, now
		}
	}
	return r
}

// Next is the next instant at which Advance may change r without anything
// observed, zero when none.
func Next(r Record) time.Time {
	switch r.Step {
	case Prepared:
		return r.At
	case Switching:
		return r.Deadline()
	}
	return time.Time{}
}
