package rotator

import (
	"fmt"
	"io"
	"strings"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Line renders one op in the stable one-line form used by Render: op, key
// ids, peer, flags and reason. It never includes key material.
func (o Op) Line() string {
	var b strings.Builder
	switch o.Kind {
	case OpAdd:
		fmt.Fprintf(&b, "add %s alg=%s maclen=%d", refText(o.Key.KeyRef), o.Key.Algorithm, macLen(o.Key.MACLen))
		if o.Key.ExcludeOptions {
			b.WriteString(" exclude-opt")
		}
		if o.Add.SetCurrent {
			b.WriteString(" set-current")
		}
		if o.Add.SetRNext {
			b.WriteString(" set-rnext")
		}
	case OpDel:
		fmt.Fprintf(&b, "del %s", refText(o.Del.KeyRef))
		if o.Del.Async {
			b.WriteString(" async")
		}
		if o.Del.SetCurrent {
			fmt.Fprintf(&b, " force-current=%d", o.Del.Current)
		}
		if o.Del.SetRNext {
			fmt.Fprintf(&b, " force-rnext=%d", o.Del.RNext)
		}
	case OpSetInfo:
		b.WriteString("set")
		if o.Current.Valid {
			fmt.Fprintf(&b, " current=%d", o.Current.ID)
		}
		if o.RNext.Valid {
			fmt.Fprintf(&b, " rnext=%d", o.RNext.ID)
		}
		if o.SetRequired {
			fmt.Fprintf(&b, " ao-required=%t", o.AORequired)
		}
	default:
		b.WriteString(o.Kind.String())
	}
	fmt.Fprintf(&b, " (%s)", o.Why)
	return b.String()
}

func macLen(m uint8) uint8 {
	if m == 0 {
		return tcpao.DefaultMACLen
	}
	return m
}

func refText(r tcpao.KeyRef) string {
	s := fmt.Sprintf("send=%d recv=%d peer=%s", r.SendID, r.RecvID, r.Peer)
	if r.IfIndex != 0 {
		s += fmt.Sprintf(" ifindex=%d", r.IfIndex)
	}
	return s
}

// Render writes the plan as stable text, one line per op, deferral and
// blocked change:
//
//	<socket> <kind> <n>. <op line>
//	<socket> <kind> edit <key> (<rule>): <text>
//	<socket> <kind> defer <key> (<reason>): <detail>
//	<socket> <kind> blocked <key> (<reason>): <detail>
//	<socket> <kind> kept <key> (<reason>): <detail>
//
// Sockets with nothing to do print "<socket> <kind> ok". The output is the
// golden-file format and what `aoctl plan` shows.
func Render(w io.Writer, p Plan) error {
	var b strings.Builder
	for _, st := range PlanLines(p) {
		b.WriteString(st.Line())
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PlanLine is one line of Render's output as data: what `aoctl plan --json`
// reports per step, and what a caller that knows the keys' names
// (chain/key) renders with them between Head and Tail.
type PlanLine struct {
	Socket SocketID
	Kind   Kind
	// Verb is the op (add, del, set), what was held (defer, blocked,
	// kept), or ok for a socket with nothing to do.
	Verb string
	// Ref is the key the step is about, when HasRef (an add, a del, a
	// held key).
	Ref    tcpao.KeyRef
	HasRef bool
	// Why is the reason of an op or a held key (zero for ok and edit).
	Why Reason
	// Edit is the rule of an edit line (an edit in place applied).
	Edit EditRule
	// Head is the line up to and including the verb ("peer 192.0.2.2
	// listening 1. add"), Tail the rest (" send=10 recv=110 ... (new)").
	Head, Tail string
}

// Line is the step as Render writes it.
func (s PlanLine) Line() string { return s.Head + s.Tail }

// Reason is the line's reason as Render writes it in parentheses: the
// edit's rule on an edit line, else Why ("" for ok).
func (s PlanLine) Reason() string {
	switch {
	case s.Edit != 0:
		return s.Edit.String()
	case s.Why != 0:
		return s.Why.String()
	}
	return ""
}

// PlanLines is the plan as Render's lines, in order, as data. It never
// includes key material.
func PlanLines(p Plan) []PlanLine {
	var out []PlanLine
	for _, sp := range p {
		head := fmt.Sprintf("%s %s", sp.Socket, sp.Kind)
		if len(sp.Ops) == 0 && len(sp.Deferred) == 0 && len(sp.Blocked) == 0 && len(sp.Kept) == 0 {
			out = append(out, PlanLine{Socket: sp.Socket, Kind: sp.Kind, Verb: "ok", Head: head + " ok"})
		}
		for i, op := range sp.Ops {
			verb := op.Kind.String()
			ref := op.Ref()
			out = append(out, PlanLine{Socket: sp.Socket, Kind: sp.Kind, Verb: verb, Ref: ref, HasRef: op.Kind == OpAdd || op.Kind == OpDel, Why: op.Why,
				Head: fmt.Sprintf("%s %d. %s", head, i+1, verb), Tail: strings.TrimPrefix(op.Line(), verb)})
		}
		for _, e := range sp.Edits {
			if e.Rule.Applied() {
				out = append(out, PlanLine{Socket: sp.Socket, Kind: sp.Kind, Verb: "edit", Ref: e.Ref, HasRef: true, Edit: e.Rule,
					Head: head + " edit", Tail: fmt.Sprintf(" %s (%s): %s", refText(e.Ref), e.Rule, e.Rule.Text())})
			}
		}
		for _, held := range []struct {
			verb string
			hs   []Held
		}{{"defer", sp.Deferred}, {"blocked", sp.Blocked}, {"kept", sp.Kept}} {
			for _, h := range held.hs {
				out = append(out, PlanLine{Socket: sp.Socket, Kind: sp.Kind, Verb: held.verb, Ref: h.Ref, HasRef: h.Ref.Peer.IsValid(), Why: h.Why,
					Head: head + " " + held.verb, Tail: fmt.Sprintf(" %s (%s): %s", heldRef(h), h.Why, h.Detail)})
			}
		}
	}
	return out
}

func heldRef(h Held) string {
	if !h.Ref.Peer.IsValid() {
		return "-"
	}
	return refText(h.Ref)
}
