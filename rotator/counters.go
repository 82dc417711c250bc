package rotator

import "time"

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
	}
	return c
}
