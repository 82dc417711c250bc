package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ExecListKey is one key of the list an ExecPlan leaves (ExecPlan.List).
type ExecListKey struct {
	// Ref is the key's IDs (an executor's keys carry no peer prefix).
	Ref tcpao.KeyRef
	// Desired is the key's index in the plan's Keys; -1: a written key no
	// longer desired that the never-strand rule keeps (the plan's Kept).
	Desired int
	// Added: the plan adds it, with the material of Keys[Desired]; else
	// it is written and keeps its written material (a desired key's new
	// material under the same IDs is not applied but by an edit's delete
	// and add: the plan's Kept says so).
	Added bool
	// Preferred: the speaker sends with it and asks the peer for it.
	// Deprecated: accepted, never sent with.
	Preferred, Deprecated bool
}

// ExecList is the key list an ExecPlan leaves of a written one.
type ExecList struct {
	Keys []ExecListKey
	// Disabled: every key was revoked and none is left: the speaker's
	// protocol is to be disabled until a key comes (the session goes down,
	// as a revoke of a borrowed socket's only key resets its session).
	Disabled bool
	// NoSendable: no key may be sent with now, and the written preferred
	// key keeps sending (it is marked Preferred).
	NoSendable bool
}

// ErrNoSendable: no key may be sent with now and none was written
// preferred; a speaker refuses a list without one, so the list is left
// as it is.
var ErrNoSendable = errors.New("no key may be sent with now (none has a send lifetime covering it) and none was: " +
	"the speaker refuses a key list without one; the peer's list is left as it is")

// List is the list p leaves of written (the list as Observe reported it):
// its deletes and adds applied, the revoked keys gone (even where the
// planner found no key to name in their place: the speaker names its
// own), each key flagged as the speaker takes it: the preferred key (the
// plan's, else the written preferred one) preferred, keys that may not be
// sent with and keys no longer desired deprecated. Sorted by IDs. Every
// executor renders its list from this one function.
func (p ExecPlan) List(written []tcpao.KeyInfo) (ExecList, error) {
	var out ExecList
	ids := make([]execID, 0, len(written))
	for _, k := range written {
		ids = append(ids, execIDOf(k.KeyRef))
	}
	added := map[execID]bool{}
	for _, op := range p.Plan.Ops {
		switch op.Kind {
		case rotator.OpDel:
			id := execIDOf(op.Del.KeyRef)
			ids = slices.DeleteFunc(ids, func(x execID) bool { return x == id })
			delete(added, id)
		case rotator.OpAdd:
			id := execIDOf(op.Key.KeyRef)
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			added[id] = true
		}
	}
	for _, r := range p.Revoked {
		ids = slices.DeleteFunc(ids, func(x execID) bool { return x == execIDOf(r) })
	}
	desired := func(id execID) int {
		return slices.IndexFunc(p.Keys, func(k policy.ScheduledKey) bool { return schedExecID(k) == id })
	}
	writtenPref := execID{}
	haveWrittenPref := false
	if i := slices.IndexFunc(written, func(k tcpao.KeyInfo) bool { return k.IsRNext }); i >= 0 {
		writtenPref, haveWrittenPref = execIDOf(written[i].KeyRef), true
	}
	pref := p.Preferred
	if pref < 0 && haveWrittenPref {
		pref = desired(writtenPref)
	}
	sendable := false
	for _, id := range ids {
		k := ExecListKey{Ref: execRef(id), Desired: desired(id), Added: added[id]}
		if k.Desired >= 0 {
			k.Preferred = k.Desired == pref
			k.Deprecated = !p.Keys[k.Desired].Sendable && !k.Preferred
		} else {
			k.Deprecated = true
		}
		sendable = sendable || !k.Deprecated
		out.Keys = append(out.Keys, k)
	}
	if len(out.Keys) == 0 && len(p.Revoked) > 0 {
		return ExecList{Disabled: true}, nil
	}
	if !sendable {
		// No key may be sent with now: keep sending with the key written
		// preferred, if it is still here.
		i := slices.IndexFunc(out.Keys, func(k ExecListKey) bool { return haveWrittenPref && execIDOf(k.Ref) == writtenPref })
		if i < 0 {
			return ExecList{}, ErrNoSendable
		}
		out.Keys[i].Preferred, out.Keys[i].Deprecated = true, false
		out.NoSendable = true
	} else if p.Preferred < 0 && pref >= 0 {
		out.NoSendable = true
	}
	slices.SortFunc(out.Keys, func(a, b ExecListKey) int {
		if a.Ref.SendID != b.Ref.SendID {
			return int(a.Ref.SendID) - int(b.Ref.SendID)
		}
		return int(a.Ref.RecvID) - int(b.Ref.RecvID)
	})
	return out, nil
}

// String is the list in the words of aoctl plan and the logs: "1/101,
// 2/102 preferred" (a deprecated key "deprecated"; every key revoked:
// "disabled").
func (l ExecList) String() string {
	if l.Disabled {
		return "disabled"
	}
	var s []string
	for _, k := range l.Keys {
		f := fmt.Sprintf("%d/%d", k.Ref.SendID, k.Ref.RecvID)
		if k.Preferred {
			f += " preferred"
		}
		if k.Deprecated {
			f += " deprecated"
		}
		s = append(s, f)
	}
	return strings.Join(s, ", ")
}
