package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
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

// holds is what the snapshot holds back (keystore.Snapshot.Held) plus the
// bound source chains it does not have at all, in a stable order.
func (rc *reconciler) holds(snap *keystore.Snapshot) []keystore.Hold {
	if snap == nil {
		return nil
	}
	out := slices.Clone(snap.Held)
	pol := rc.policy()
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
	keys    rotator.KeyRange
	binding string
	why     string
	// missing: the binding's keys could not be computed, and none of
	// them is in the listeners' desired keys (a degraded chain's are).
	missing bool
}

// frozenKeys are the frozen bindings' key ranges, for Desired.Frozen: the
// planner sees their keys and deletes none of them.
func frozenKeys(frozen []frozenRange) []rotator.KeyRange {
	if len(frozen) == 0 {
		return nil
	}
	out := make([]rotator.KeyRange, len(frozen))
	for i, f := range frozen {
		out[i] = f.keys
	}
	return out
}

// freeze records that binding b keeps its listener keys, and why.
func freeze(frozen []frozenRange, b policy.Binding, why error) []frozenRange {
	r := rotator.KeyRange{Prefix: b.Neighbor}
	if idx, err := ifIndex(b.VRF); err != nil {
		r.AnyDevice = true
	} else {
		r.IfIndex = idx
	}
	return append(frozen, frozenRange{keys: r, binding: b.String(), why: why.Error(), missing: !errors.Is(why, errFrozen)})
}

// logFrozen warns about each frozen binding (once per recompute).
func (rc *reconciler) logFrozen(frozen []frozenRange) {
	for _, f := range frozen {
		rc.log.Warn("binding's keys cannot be computed or its key chain is degraded in the key source: none of its listener keys is deleted",
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
