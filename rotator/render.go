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
//	<socket> <kind> defer <key> (<reason>): <detail>
//	<socket> <kind> blocked <key> (<reason>): <detail>
//	<socket> <kind> kept <key> (<reason>): <detail>
//
// Sockets with nothing to do print "<socket> <kind> ok". The output is the
// golden-file format and what `aoctl plan` shows.
func Render(w io.Writer, p Plan) error {
	var b strings.Builder
	for _, sp := range p {
		head := fmt.Sprintf("%s %s", sp.Socket, sp.Kind)
		if len(sp.Ops) == 0 && len(sp.Deferred) == 0 && len(sp.Blocked) == 0 && len(sp.Kept) == 0 {
			fmt.Fprintf(&b, "%s ok\n", head)
		}
		for i, op := range sp.Ops {
			fmt.Fprintf(&b, "%s %d. %s\n", head, i+1, op.Line())
		}
		for _, h := range sp.Deferred {
			fmt.Fprintf(&b, "%s defer %s (%s): %s\n", head, heldRef(h), h.Why, h.Detail)
		}
		for _, h := range sp.Blocked {
			fmt.Fprintf(&b, "%s blocked %s (%s): %s\n", head, heldRef(h), h.Why, h.Detail)
		}
		for _, h := range sp.Kept {
			fmt.Fprintf(&b, "%s kept %s (%s): %s\n", head, heldRef(h), h.Why, h.Detail)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func heldRef(h Held) string {
	if !h.Ref.Peer.IsValid() {
		return "-"
	}
	return refText(h.Ref)
}
