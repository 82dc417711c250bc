package keystore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// HoldReason says why a chain or key of a snapshot is not what the key
// source's last read said. Status, metrics and plans classify holds by it.
type HoldReason uint8

// Hold reasons.
const (
	// HoldKeyRejected: the source lists the key, but its entry fails
	// validation (an 81-byte secret, an unknown algorithm, bad base64...).
	HoldKeyRejected HoldReason = iota + 1
	// HoldChainMissing: the source no longer lists a chain the policy
	// binds (renamed, or deleted while other chains remain).
	HoldChainMissing
	// HoldNoUsableKey: the source lists the chain, but no usable key in it
	// (emptied, or every key removed or revoked).
	HoldNoUsableKey
)

var holdReasonNames = [...]string{
	HoldKeyRejected:  "key-rejected",
	HoldChainMissing: "chain-missing",
	HoldNoUsableKey:  "no-usable-key",
}

func (r HoldReason) String() string {
	if int(r) < len(holdReasonNames) && holdReasonNames[r] != "" {
		return holdReasonNames[r]
	}
	return fmt.Sprintf("hold(%d)", uint8(r))
}

// Hold is one chain or key of a bound chain whose last read lost something:
// a key was rejected, the chain vanished or was left with no usable key.
//
// With LastGood, the Cache kept the last good version of the key (or of
// every key of the chain, Key ""), so what aokeyd installs does not change.
// Without it no good version is known (the first read since aokeyd started
// was already bad): the snapshot holds only what the source gave, and
// whoever applies it must delete nothing the lost key may have installed.
type Hold struct {
	Chain string
	// Key is the MKT's name ("#N" for a rejected entry without a usable
	// name); "" when the hold concerns the whole chain.
	Key    string
	Reason HoldReason
	// Field is the rejected field (HoldKeyRejected).
	Field string
	// Source locates the rejected entry ("file /etc/aokeyd/keys.yaml:12").
	Source string
	// Detail is the validation error's message (never key bytes, nor a
	// secret's length).
	Detail   string
	LastGood bool
}

// What names the held chain or key: "core" or "core/2026-11".
func (h Hold) What() string {
	if h.Key == "" {
		return h.Chain
	}
	return h.Chain + "/" + h.Key
}

// String describes the hold for logs and status.
func (h Hold) String() string {
	var b strings.Builder
	switch h.Reason {
	case HoldKeyRejected:
		fmt.Fprintf(&b, "key %s is invalid in the key source (%s)", h.What(), h.fieldText())
	case HoldChainMissing:
		fmt.Fprintf(&b, "key chain %s is missing from the key source", h.Chain)
	case HoldNoUsableKey:
		fmt.Fprintf(&b, "key chain %s has no usable key in the key source", h.Chain)
	default:
		fmt.Fprintf(&b, "%s: %s", h.What(), h.Reason)
	}
	if h.LastGood {
		b.WriteString(": held back, its last good version is kept")
	} else {
		b.WriteString(": no last good version is known; installed keys are kept (nothing is deleted or switched for the chain until the source is fixed)")
	}
	return b.String()
}

func (h Hold) fieldText() string {
	s := h.Source
	if h.Field != "" {
		s += ": " + h.Field
	}
	if h.Detail != "" {
		s += ": " + h.Detail
	}
	return strings.TrimPrefix(s, ": ")
}

// Degraded reports whether the snapshot lost something of chain that it
// could not make up for with a last good version: a rejected key or an
// empty chain seen with no good version before it. A missing chain cannot
// be reported here; the caller knows which chains it needs.
func (s *Snapshot) Degraded(chain string) bool {
	if s == nil {
		return false
	}
	return slices.ContainsFunc(s.Held, func(h Hold) bool { return h.Chain == chain && !h.LastGood })
}

// HeldIn returns the holds of one chain.
func (s *Snapshot) HeldIn(chain string) []Hold {
	var out []Hold
	for _, h := range s.Held {
		if h.Chain == chain {
			out = append(out, h)
		}
	}
	return out
}

// fieldErrors indexes a chain's rejections by key name; unnamed collects
// those that cannot be matched to a name (the name itself is bad).
func fieldErrors(c *Chain) (byName map[string]*FieldError, unnamed []*FieldError) {
	for _, err := range c.Rejected {
		var fe *FieldError
		if !errors.As(err, &fe) {
			unnamed = append(unnamed, &FieldError{Chain: c.Name, Err: err})
			continue
		}
		if fe.Key == "" || strings.HasPrefix(fe.Key, "#") {
			unnamed = append(unnamed, fe)
			continue
		}
		if byName == nil {
			byName = map[string]*FieldError{}
		}
		if _, dup := byName[fe.Key]; !dup {
			byName[fe.Key] = fe
		}
	}
	return byName, unnamed
}

func rejectedHold(chain, key string, fe *FieldError, lastGood bool) Hold {
	h := Hold{Chain: chain, Key: key, Reason: HoldKeyRejected, LastGood: lastGood}
	if fe != nil {
		h.Field, h.Source = fe.Field, fe.Where()
		if fe.Err != nil {
			h.Detail = fe.Err.Error()
		}
	}
	return h
}

func usable(keys []MKT) bool {
	return slices.ContainsFunc(keys, func(m MKT) bool { return !m.Revoked })
}

// hasMD5 reports whether c holds a TCP-MD5 password in force: a chain of
// TCP-MD5 peers that have no TCP-AO key yet is not an emptied one.
func hasMD5(c *Chain) bool { return c.MD5 != nil && !c.MD5.Revoked }

// merge folds the last good snapshot good into the fresh read s (owned by
// the caller, modified in place), per chain and per key, for the chains
// bound reports (nil: every chain):
//
//   - a chain s no longer has keeps its last good version (HoldChainMissing);
//   - a key s rejects keeps its last good version (HoldKeyRejected);
//   - a key s no longer lists leaves, unless the chain would be left with
//     no usable key (then it stays: HoldNoUsableKey) or a rejected entry
//     without a usable name may stand in its place (HoldKeyRejected).
//
// Rejections and empty bound chains that no good version makes up for are
// recorded too, without LastGood. The held keys are clones: s owns them.
func merge(good, s *Snapshot, bound func(string) bool) {
	if bound == nil {
		bound = func(string) bool { return true }
	}
	s.Held = nil
	heldKey := map[[2]string]bool{}
	if good != nil {
		for _, name := range good.ChainNames() {
			if !bound(name) {
				continue
			}
			gc := good.Chains[name]
			nc := s.Chains[name]
			if nc == nil {
				if !usable(gc.Keys) && !hasMD5(gc) {
					continue
				}
				c := gc.Clone()
				c.Rejected = nil
				s.Chains[name] = c
				s.Held = append(s.Held, Hold{Chain: name, Reason: HoldChainMissing, LastGood: true})
				continue
			}
			byName, unnamed := fieldErrors(nc)
			var kept, vanished []MKT
			var holds []Hold
			for _, gk := range gc.Keys {
				if gk.Revoked {
					continue
				}
				if _, ok := nc.Key(gk.Name); ok {
					continue // the new version is in force
				}
				switch fe, ok := byName[gk.Name]; {
				case ok:
					kept = append(kept, gk.Clone())
					holds = append(holds, rejectedHold(name, gk.Name, fe, true))
					heldKey[[2]string{name, gk.Name}] = true
				case len(unnamed) > 0:
					kept = append(kept, gk.Clone())
					holds = append(holds, rejectedHold(name, gk.Name, unnamed[0], true))
					heldKey[[2]string{name, unnamed[0].Key}] = true
				default:
					vanished = append(vanished, gk)
				}
			}
			if len(vanished) > 0 && !usable(nc.Keys) && !usable(kept) && !hasMD5(nc) {
				for _, gk := range vanished {
					kept = append(kept, gk.Clone())
				}
				holds = append(holds, Hold{Chain: name, Reason: HoldNoUsableKey, LastGood: true})
			}
			nc.Keys = append(nc.Keys, kept...)
			s.Held = append(s.Held, holds...)
		}
	}
	// What no good version makes up for.
	for _, name := range s.ChainNames() {
		if !bound(name) {
			continue
		}
		c := s.Chains[name]
		byName, unnamed := fieldErrors(c)
		for _, key := range sortedKeys(byName) {
			if _, ok := c.Key(key); ok || heldKey[[2]string{name, key}] {
				continue // a valid duplicate of the name, or held
			}
			s.Held = append(s.Held, rejectedHold(name, key, byName[key], false))
		}
		for _, fe := range unnamed {
			if !heldKey[[2]string{name, fe.Key}] {
				s.Held = append(s.Held, rejectedHold(name, fe.Key, fe, false))
			}
		}
		// A chain of revoked keys only was emptied through revoke.
		if len(c.Keys) == 0 && !hasMD5(c) && !slices.ContainsFunc(s.Held, func(h Hold) bool { return h.Chain == name }) {
			s.Held = append(s.Held, Hold{Chain: name, Reason: HoldNoUsableKey})
		}
	}
}

// sameHolds compares two hold lists.
func sameHolds(a, b []Hold) bool { return slices.Equal(a, b) }
