package daemon

import "github.com/aokeyd/aokeyd/rotator"

// zeroDesired zeroes the desired states' secrets that are their own;
// the shared copies desired.Socket gives them, which other peers' desired
// states hold too, it leaves (tcpao.Secret.Shared): those are wiped once
// nothing refers to them.
func zeroDesired(ds ...rotator.Desired) {
	for _, d := range ds {
		for _, k := range d.Keys {
			k.Secret.Zero()
		}
	}
}

// fitKeys is d with its keys in a slice of their number: the cached want
// is kept until the next pass, and append's headroom (up to a quarter at
// a route server's 16,384 keys: 0.5 MiB) with it. The copy shares each
// key's secret (zeroDesired zeroes it through either).
func fitKeys(d rotator.Desired) rotator.Desired {
	if cap(d.Keys)-len(d.Keys) > len(d.Keys)/32 {
		d.Keys = append(make([]rotator.DesiredKey, 0, len(d.Keys)), d.Keys...)
	}
	return d
}
