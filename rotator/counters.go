package rotator

import (
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Counters are one socket's TCP-AO counters as read at At (TCP_AO_INFO and
// TCP_AO_GET_KEYS): the machine records them on every read of its socket
// (steady re-reads and roll polls) in its published Status, so metrics are
// served without reading the kernel again. They never hold key material.
// A Counters value is immutable once published: each read makes a new one.
type Counters struct {
	At     time.Time // zero: never read
	HaveAO bool      // the socket has TCP-AO

	PktGood, PktBad, PktKeyNotFound, PktAORequired uint64
	Keys                                           []KeyCounters
	// Carried are the keys that carry the session (CarriedKeys): a
	// listener keeps every key they name (Observed.Carried).
	Carried []tcpao.KeyRef
	// CarriedFP are their materials' fingerprints, in Carried's order
	// (zero for a key read bare: without its fingerprint).
	CarriedFP []tcpao.Fingerprint
}

// KeyCounters are one key's TCP_AO_GET_KEYS counters.
type KeyCounters struct {
	SendID, RecvID  uint8
	PktGood, PktBad uint64
}

// CountersOf takes the counters of an observation made at at.
func CountersOf(o Observed, at time.Time) Counters {
	c := Counters{At: at, HaveAO: o.HaveAO, PktGood: o.Info.PktGood, PktBad: o.Info.PktBad,
		PktKeyNotFound: o.Info.PktKeyNotFound, PktAORequired: o.Info.PktAORequired}
	if len(o.Keys) > 0 {
		c.Keys = make([]KeyCounters, len(o.Keys))
		for i, k := range o.Keys {
			c.Keys[i] = KeyCounters{SendID: k.SendID, RecvID: k.RecvID, PktGood: k.PktGood, PktBad: k.PktBad}
		}
		c.Carried = CarriedKeys(o)
		if len(c.Carried) > 0 {
			c.CarriedFP = make([]tcpao.Fingerprint, 0, len(c.Carried))
			for i := range o.Keys {
				if k := &o.Keys[i]; carries(k) {
					c.CarriedFP = append(c.CarriedFP, k.Fingerprint)
				}
			}
		}
	}
	return c
}

// CarriedKey is one key a peer's session carries: its reference and its
// material's fingerprint (zero when it was read without it). It is what
// survives a restart of what the never-strand rule keeps (Controller.Restore).
type CarriedKey struct {
	Ref tcpao.KeyRef
	FP  tcpao.Fingerprint
}

// carriedOf pairs a Counters' carried keys with their fingerprints.
func carriedOf(c Counters) []CarriedKey {
	if len(c.Carried) == 0 {
		return nil
	}
	out := make([]CarriedKey, len(c.Carried))
	for i, r := range c.Carried {
		out[i].Ref = r
		if i < len(c.CarriedFP) {
			out[i].FP = c.CarriedFP[i]
		}
	}
	return out
}

// carrying is c with k among its carried keys: a write of RNext_key or
// Current_key that succeeded after c was read makes the key it names carry
// the session from the write on (the peer may switch to it with its next
// segment), not from the next read, which a session that ends first never
// makes. c is not modified (published counters are immutable).
func (c Counters) carrying(k CarriedKey) Counters {
	if k.Ref == (tcpao.KeyRef{}) || slices.Contains(c.Carried, k.Ref) {
		return c
	}
	fp := c.CarriedFP
	if len(fp) < len(c.Carried) { // counters made without fingerprints
		fp = append(slices.Clone(fp), make([]tcpao.Fingerprint, len(c.Carried)-len(fp))...)
	}
	c.Carried = append(slices.Clone(c.Carried), k.Ref)
	c.CarriedFP = append(slices.Clone(fp), k.FP)
	return c
}

// carriedKeyOf is k as a carried key (zero for nil).
func carriedKeyOf(k *tcpao.KeyInfo) CarriedKey {
	if k == nil {
		return CarriedKey{}
	}
	return CarriedKey{Ref: k.KeyRef, FP: k.Fingerprint}
}

// CarriedKeys are the keys of an established socket that carry its
// session, by the never-strand rule: Current_key, RNext_key, and every key
// the peer sent with (pkt_good > 0), the one it last authenticated with
// among them. nil when there are none.
func CarriedKeys(o Observed) []tcpao.KeyRef {
	var out []tcpao.KeyRef
	for i := range o.Keys {
		if k := &o.Keys[i]; carries(k) {
			out = append(out, k.KeyRef)
		}
	}
	return out
}

// carries is CarriedKeys' rule for one key.
func carries(k *tcpao.KeyInfo) bool { return k.IsCurrent || k.IsRNext || k.PktGood > 0 }
