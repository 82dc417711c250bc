// Package revocation is aokeyd's one record of revoked keys, whichever
// speaker it drives: the daemon that keys a speaker's sockets and the
// BIRD driver both record a revoke here, and both read the same record,
// revocations.json in the state directory (File), at start. Switching
// speaker.type forgets no revocation.
//
// Invariants:
//   - The record names keys only (chain, key, the peer a revoke is scoped
//     to, when), never key material.
//   - One outcome per revoke (Store.Add): it is recorded and in force, or
//     neither, the same now and after a restart; what is in force in
//     memory is what the record holds.
//   - The record lives in the shared record layer (durable.Record): read
//     as a regular file only, capped (MaxRecordBytes), kept with a backup
//     that restores it when it is found unreadable; a record that cannot
//     be read refuses the start, never an empty record invented.
//   - A peer is its peer.Key, written in its text form ("10.0.0.2 vrf
//     red"); entries written before, with the VRF in a field of its own
//     and the address as older writers left it, read as the same peer.
//   - A record an older BIRD driver kept on its own (BirdFile) is merged
//     into this one at the first start, recorded before it is removed.
package revocation

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
)

// File is the record's name in aokeyd's state directory.
const File = "revocations.json"

// Revocation is one recorded emergency revoke: key Key of chain Chain,
// on every peer's sockets, or on Peer's alone.
type Revocation struct {
	Chain string
	Key   string
	// Peer scopes the revocation to one peer (address and VRF, or an
	// interface neighbour's interface and VRF); zero: it
	// applies everywhere. Records written before scopes existed have no
	// peer and stay global.
	Peer peer.Key
	At   time.Time
}

// Global reports whether r applies to every peer.
func (r Revocation) Global() bool { return !r.Peer.IsValid() }

// Same reports whether r and o revoke the same key for the same peers
// (when aside).
func (r Revocation) Same(o Revocation) bool {
	return r.Chain == o.Chain && r.Key == o.Key && r.Peer == o.Peer
}

func (r Revocation) String() string {
	s := r.Chain + "/" + r.Key
	if !r.Global() {
		s += " for peer " + r.Peer.Name() // an address, or an interface neighbour's interface
		if r.Peer.VRF != "" {
			s += " (vrf " + r.Peer.VRF + ")"
		}
	}
	return s
}

// wire is a revocation as the record holds it. VRF is only read: the
// field in which entries written before the peer was one field kept its
// VRF.
type wire struct {
	Chain string    `json:"chain"`
	Key   string    `json:"key"`
	Peer  string    `json:"peer,omitempty"`
	VRF   string    `json:"vrf,omitempty"`
	At    time.Time `json:"at"`
}

// MarshalJSON writes r as the record holds it: the peer, when scoped, in
// its text form.
func (r Revocation) MarshalJSON() ([]byte, error) {
	w := wire{Chain: r.Chain, Key: r.Key, At: r.At}
	if !r.Global() {
		w.Peer = r.Peer.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads an entry of the record, of this form or an older
// one (revocationOf).
func (r *Revocation) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := revocationOf(w)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// revocationOf is the revocation an entry of the record holds: a chain
// and a key, and a peer when scoped (peer.ParseWithVRF: the text form,
// or a bare address with its VRF beside it, as older records wrote it).
func revocationOf(w wire) (Revocation, error) {
	r := Revocation{Chain: w.Chain, Key: w.Key, At: w.At}
	switch {
	case w.Chain == "" || w.Key == "":
		return r, fmt.Errorf("it lacks its chain or key")
	case w.Peer == "" && w.VRF != "":
		return r, fmt.Errorf("it has a vrf but no peer")
	case w.Peer != "":
		k, err := peer.ParseWithVRF(w.Peer, w.VRF)
		if err != nil {
			return r, fmt.Errorf("peer %q is not an address or an interface neighbour's interface (ADDR or IFACE, then optionally vrf NAME)", w.Peer)
		}
		r.Peer = k
	}
	return r, nil
}
