package control

import (
	"fmt"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Warnings the server derives from a report's fields (Complete).
const (
	// WarnNotPassive: the speaker may connect to the neighbor and nothing
	// puts keys on those connections (PeerStatus.ActiveOpensKeyed false).
	WarnNotPassive = "not passive, and nothing keys its active opens: the BGP speaker's outgoing connections to this neighbor carry no TCP-AO key; set the neighbor passive (gobgpd: passive-mode = true) or run the speaker under aokeyd exec"
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

// KernelDefectOf is the status entry of a known kernel defect.
func KernelDefectOf(d tcpao.Defect) KernelDefect {
	return KernelDefect{ID: d.ID, Summary: d.Summary, FixedIn: d.Fixed(), Mitigation: d.Mitigation.String()}
}

// WarnKernelDefect is the warning for a known TCP-AO defect of the kernel:
// the release, the defect, the releases that fix it and what aokeyd does.
func WarnKernelDefect(release string, d KernelDefect) string {
	return fmt.Sprintf("kernel %s has %s (%s), fixed in %s: aokeyd uses %s until the kernel is upgraded",
		release, d.ID, d.Summary, d.FixedIn, d.Mitigation)
}

// WarnKernelUnplaced is the warning for a kernel release that could not be
// checked against the known TCP-AO defects.
func WarnKernelUnplaced(k KernelStatus) string {
	return fmt.Sprintf("kernel %s cannot be checked for known TCP-AO defects (%s): aokeyd assumes it has them all and uses %s",
		k.Release, k.Unplaced, k.Mitigation)
}

// WarnListenerMPTCP is the warning (and aokeyd's log line) for a speaker
// listening on port with a Multipath TCP socket (ListenerMPTCP): why, and
// the fix.
func WarnListenerMPTCP(port uint16) string {
	return fmt.Sprintf("the speaker's listener on port %d is a Multipath TCP socket "+
		"(Go 1.24 and later listen with MPTCP by default on kernels with CONFIG_MPTCP): "+
		"TCP-AO cannot be set on it; start the speaker with GODEBUG=multipathtcp=0 (or net.mptcp.enabled=0)", port)
}

// Complete adds the warnings that follow from the report's fields (stale key
// source, optmem too small, known kernel defects, listener faults, peers
// whose outgoing connections carry no keys, no Current_key), without
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
	if k := r.Kernel; k != nil {
		for _, d := range k.Defects {
			add(&r.Warnings, WarnKernelDefect(k.Release, d))
		}
		if k.Unplaced != "" {
			add(&r.Warnings, WarnKernelUnplaced(*k))
		}
	}
	for _, f := range r.ListenerFaults {
		if f.Reason == ListenerMPTCP {
			add(&r.Warnings, WarnListenerMPTCP(f.Port))
		}
	}
	if r.Peers == nil {
		r.Peers = []PeerStatus{}
	}
	for i := range r.Peers {
		p := &r.Peers[i]
		if !p.Passive && !p.ActiveOpensKeyed {
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
