package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// A key source read that succeeds but loses keys must not change what is
// installed. keystore.Cache keeps the last good version of what the read
// lost (Snapshot.Held, LastGood). What it cannot make up for — a chain the
// snapshot lacks or that is degraded (a rejected key or an empty chain
// with no good version known, as after a restart) — freezes the chain's
// bindings here: on the listener nothing of theirs is deleted (desired keys
// are still added), and their established sessions get no new desired
// state, so nothing is deleted or switched there either. Everything is
// reported: log, status warnings and key_source.held, the
// aokeyd_keys_held_back metric and the plan.

// errFrozen is wrapped by desiredFor for a peer whose chain is degraded.
var errFrozen = errors.New("key chain degraded in the key source: the session's keys are left as they are (nothing deleted or switched) until the source is fixed")

// boundChain reports whether a source chain is read by a key chain that
// some binding uses (the key cache holds only those back).
func (d *Daemon) boundChain(chain string) bool { return d.pol.Load().bound[chain] }

// holds is what the snapshot holds back (keystore.Snapshot.Held) plus the
// bound source chains it does not have at all, in a stable order.
func (d *Daemon) holds(snap *keystore.Snapshot) []keystore.Hold {
	if snap == nil {
		return nil
	}
	out := slices.Clone(snap.Held)
	pol := d.policy()
	seen := map[string]bool{}
	for _, b := range pol.Bindings() {
		c, ok := pol.Chain(b.KeyChain)
		if !ok || seen[c.SourceChain] || snap.Chains[c.SourceChain] != nil {
			continue
		}
		seen[c.SourceChain] = true
		out = append(out, keystore.Hold{Chain: c.SourceChain, Reason: keystore.HoldChainMissing})
	}
	return out
}

// frozenRange is a binding whose keys on the listener are not deleted.
type frozenRange struct {
	prefix  netip.Prefix
	ifindex int // -1: any
	binding string
	why     string
}

func (f frozenRange) covers(r tcpao.KeyRef) bool {
	return (f.ifindex < 0 || f.ifindex == r.IfIndex) && r.Peer.Addr().Is4() == f.prefix.Addr().Is4() &&
		r.Peer.Bits() >= f.prefix.Bits() && f.prefix.Contains(r.Peer.Addr())
}

// keepSocket hides from the planner the keys of frozen bindings that are
// not desired (nor revoked), so that a listener sync deletes none of them.
type keepSocket struct {
	tcpao.Socket
	keep func(tcpao.KeyRef) bool
}

func (k keepSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	ks, err := k.Socket.Keys(f)
	if err != nil {
		return ks, err
	}
	return slices.DeleteFunc(ks, func(ki tcpao.KeyInfo) bool { return k.keep(ki.KeyRef) }), nil
}

// keeping wraps a listener for want when bindings are frozen.
func keeping(sock tcpao.Socket, want rotator.Desired, frozen []frozenRange) tcpao.Socket {
	if len(frozen) == 0 {
		return sock
	}
	norm := func(r tcpao.KeyRef) tcpao.KeyRef { r.Peer = r.Peer.Masked(); return r }
	listed := make(map[tcpao.KeyRef]bool, len(want.Keys)+len(want.Revoked))
	for _, k := range want.Keys {
		listed[norm(k.KeyRef)] = true
	}
	for _, r := range want.Revoked {
		listed[norm(r)] = true
	}
	return keepSocket{Socket: sock, keep: func(r tcpao.KeyRef) bool {
		if listed[norm(r)] {
			return false
		}
		return slices.ContainsFunc(frozen, func(f frozenRange) bool { return f.covers(r) })
	}}
}

// freeze records that binding b keeps its listener keys, and why.
func freeze(frozen []frozenRange, b policy.Binding, why error) []frozenRange {
	idx, err := ifIndex(b.VRF)
	if err != nil {
		idx = -1
	}
	return append(frozen, frozenRange{prefix: b.Neighbor, ifindex: idx, binding: b.String(), why: why.Error()})
}

// logFrozen warns about each frozen binding (once per recompute).
func (d *Daemon) logFrozen(frozen []frozenRange) {
	for _, f := range frozen {
		d.log.Warn("binding's keys cannot be computed or its key chain is degraded in the key source: none of its listener keys is deleted",
			"binding", f.binding, "why", f.why)
	}
}

func heldKey(h keystore.Hold) control.HeldKey {
	return control.HeldKey{Chain: h.Chain, Key: h.Key, Reason: h.Reason.String(), Field: h.Field, Source: h.Source, LastGood: h.LastGood}
}

// holdWarning is the status warning for a hold; every one says that the
// installed keys are kept.
func holdWarning(h keystore.Hold) string {
	if h.Reason == keystore.HoldChainMissing && !h.LastGood {
		return fmt.Sprintf("key chain %s is missing from the key source (renamed or deleted?): no good version is known; installed keys are kept (nothing is deleted or switched for its bindings until the source has it again)", h.Chain)
	}
	return h.String()
}

// holdPlanLine is the plan's line for a hold.
func holdPlanLine(h keystore.Hold) string {
	what := h.Reason.String()
	if h.Field != "" {
		what += " field " + h.Field
	}
	if h.LastGood {
		return fmt.Sprintf("held back  %s  %s: last good version kept", h.What(), what)
	}
	return fmt.Sprintf("held back  %s  %s: no good version known; its bindings keep their installed keys (no deletes, no switches)", h.What(), what)
}

func metricHolds(hs []keystore.Hold) []metrics.HeldBack {
	out := make([]metrics.HeldBack, 0, len(hs))
	for _, h := range hs {
		out = append(out, metrics.HeldBack{Chain: h.Chain, Key: h.Key, Reason: h.Reason.String(), LastGood: h.LastGood})
	}
	return out
}
