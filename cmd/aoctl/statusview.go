package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// inUse is the key a session sends with and the key its peer sends with.
type inUse struct {
	sending, peer, asked *control.KeyName
}

// keysInUse is what the daemon says of the keys in use; from an older
// daemon that does not say, the kernel's Current_key and RNext_key marks
// of the peer's keys.
func keysInUse(p control.PeerStatus) inUse {
	u := inUse{sending: p.Sending, peer: p.PeerSending, asked: p.PeerAsked}
	if u.sending != nil || u.peer != nil {
		return u
	}
	for _, k := range p.Keys {
		n := &control.KeyName{Chain: k.Chain, Name: k.Name, SendID: k.SendID, RecvID: k.RecvID}
		if k.Current {
			u.sending = n
		}
		if k.RNext {
			u.peer = n
		}
	}
	return u
}

// short names a key in the summary table: its name, or its IDs.
func short(k *control.KeyName) string {
	switch {
	case k == nil:
		return "-"
	case k.Name != "":
		return k.Name
	}
	return fmt.Sprintf("%d/%d", k.SendID, k.RecvID)
}

func (u inUse) sendingShort() string { return short(u.sending) }

// peerShort is the peer's key, and the one it is asked to move to.
func (u inUse) peerShort() string {
	if u.asked != nil {
		return short(u.peer) + ">" + short(u.asked)
	}
	return short(u.peer)
}

// renderNeighbor writes what the speaker reports of the neighbor: its AS,
// description, flaps and last down, as birdc show protocols all and FRR's
// show bgp neighbors show them.
func renderNeighbor(w io.Writer, p control.PeerStatus, now time.Time) {
	var parts []string
	if p.PeerAS != 0 {
		parts = append(parts, "AS "+strconv.FormatUint(uint64(p.PeerAS), 10))
	}
	if p.Description != "" {
		parts = append(parts, strconv.Quote(p.Description))
	}
	if p.Flaps == 1 {
		parts = append(parts, "1 flap")
	} else {
		parts = append(parts, fmt.Sprintf("%d flaps", p.Flaps))
	}
	down := "last down: not reported"
	switch {
	case !p.LastDown.IsZero() && p.LastDownReason != "":
		down = fmt.Sprintf("last down %s: %s", when(p.LastDown, now), p.LastDownReason)
	case !p.LastDown.IsZero():
		down = "last down " + when(p.LastDown, now)
	case p.LastDownReason != "":
		down = "last down: " + p.LastDownReason
	}
	fmt.Fprintf(w, "  Neighbor: %s, %s\n", strings.Join(parts, ", "), down)
}

// renderKeysInUse writes the key the session sends with and the key the
// peer sends with, spelled out rather than left to the CUR and RNEXT marks
// and the counters.
func renderKeysInUse(w io.Writer, p control.PeerStatus) {
	u := keysInUse(p)
	if u.sending == nil && u.peer == nil {
		return
	}
	fmt.Fprint(w, "  Keys in use: sending with ")
	if u.sending == nil {
		fmt.Fprint(w, "none (no Current_key)")
	} else {
		fmt.Fprintf(w, "%s (Current_key, send id %d)", u.sending, u.sending.SendID)
	}
	fmt.Fprint(w, "; the peer sends with ")
	switch {
	case u.peer == nil:
		fmt.Fprint(w, "no key this session holds")
	case u.asked != nil:
		fmt.Fprintf(w, "%s (recv id %d)", u.peer, u.peer.RecvID)
	default:
		fmt.Fprintf(w, "%s (RNext_key, recv id %d)", u.peer, u.peer.RecvID)
	}
	if u.asked != nil {
		fmt.Fprintf(w, ", asked to move to %s (RNext_key, recv id %d)", u.asked, u.asked.RecvID)
	}
	fmt.Fprintln(w)
}
