package control

import (
	"fmt"
	"slices"
	"time"
)

// Warnings the server derives from a report's fields (Complete).
const (
	WarnNotPassive = "not passive: the BGP daemon may initiate the session; set the neighbor passive for hitless rotation"
	WarnNoCurrent  = "no Current_key on the established socket"
)

// WarnStale is the warning for a key source whose last good read is too old.
func WarnStale(ks KeySourceStatus) string {
	w := fmt.Sprintf("key source %s is stale: last good read %s ago", ks.Name, time.Duration(ks.Age).Round(time.Second))
	if ks.LastError != "" {
		w += " (" + ks.LastError + ")"
	}
	return w
}

// WarnOptmem is the warning for net.core.optmem_max below what keys need.
func WarnOptmem(o Optmem) string {
	return fmt.Sprintf("net.core.optmem_max %d is below the %d bytes the key sets need (raise it, or set kernel.raise_optmem)", o.Limit, o.Needed)
}

// Complete adds the warnings that follow from the report's fields (stale key
// source, optmem too small, peers not passive, no Current_key), without
// duplicating ones already there. The server calls it on every report, so the
// Backend need not.
func (r *StatusReport) Complete() {
	add := func(ws *[]string, w string) {
		if !slices.Contains(*ws, w) {
			*ws = append(*ws, w)
		}
	}
	if r.KeySource.Stale {
		add(&r.Warnings, WarnStale(r.KeySource))
	}
	if r.Optmem.Limit > 0 && r.Optmem.Needed > r.Optmem.Limit {
		add(&r.Warnings, WarnOptmem(r.Optmem))
	}
	if r.Peers == nil {
		r.Peers = []PeerStatus{}
	}
	for i := range r.Peers {
		p := &r.Peers[i]
		if !p.Passive {
			add(&p.Warnings, WarnNotPassive)
		}
		hasEst, hasCur := false, false
		for _, s := range p.Sockets {
			hasEst = hasEst || s.Kind == KindEstablished
		}
		for _, k := range p.Keys {
			hasCur = hasCur || k.Current
		}
		if hasEst && len(p.Keys) > 0 && !hasCur {
			add(&p.Warnings, WarnNoCurrent)
		}
	}
}
