package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// chainsReport is `aoctl status --keys --json`.
type chainsReport struct {
	GeneratedAt time.Time             `json:"generated_at"`
	Chains      []control.ChainStatus `json:"chains"`
}

// renderChains writes the key chain view of aoctl status --keys, as Junos'
// show security keychain gives it: per chain the key sent with now, the
// next one and from when, then the chain's keys with their lifetimes.
func renderChains(w io.Writer, rep control.StatusReport, now time.Time) {
	if len(rep.Chains) == 0 {
		fmt.Fprintln(w, "No key chains: the policy binds none, or the daemon has no key snapshot yet (or is older than this aoctl).")
		return
	}
	t := newTable(w, "", "CHAIN", "BINDINGS", "SENDING", "SEND/RECV", "NEXT", "SEND/RECV", "FROM")
	for _, c := range rep.Chains {
		cur, next := c.Sending, c.Next
		from := when(c.NextAt, now)
		nextName := "-"
		switch {
		case next != nil:
			nextName = next.Name
		case !c.NextAt.IsZero():
			nextName = "NONE" // nothing to send with from then on
		}
		t.row(c.Chain, strconv.Itoa(c.Bindings), keyOrNone(cur), ids(cur), nextName, ids(next), from)
	}
	t.flush()
	for _, c := range rep.Chains {
		fmt.Fprintf(w, "\nKey chain %s:", c.Chain)
		if c.Problem != "" {
			fmt.Fprintf(w, " %s\n", c.Problem)
			continue
		}
		switch {
		case c.Sending == nil:
			fmt.Fprint(w, " NO key to send with now")
		default:
			fmt.Fprintf(w, " sending %s since %s", c.Sending.Name, stampOr(c.Sending.SendLifetime.Start, "ever"))
		}
		switch {
		case c.Next != nil:
			fmt.Fprintf(w, "; next %s from %s", c.Next.Name, when(c.NextAt, now))
		case !c.NextAt.IsZero():
			fmt.Fprintf(w, "; NO key to send with from %s", when(c.NextAt, now))
		default:
			fmt.Fprint(w, "; no next key in the key source")
		}
		fmt.Fprintln(w)
		if len(c.Keys) == 0 {
			fmt.Fprintln(w, "  Keys: none")
			continue
		}
		kt := newTable(w, "  ", "KEY", "SEND", "RECV", "SEND-LIFETIME", "ACCEPT-LIFETIME", "USE")
		for _, k := range c.Keys {
			use := "accept"
			switch {
			case c.Sending != nil && k.Name == c.Sending.Name:
				use = "send"
			case c.Next != nil && k.Name == c.Next.Name:
				use = "next"
			}
			kt.row(k.Name, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID)), lifetime(k.SendLifetime), lifetime(k.AcceptLifetime), use)
		}
		kt.flush()
	}
}

func keyOrNone(k *control.ChainKey) string {
	if k == nil {
		return "NONE"
	}
	return k.Name
}

// ids is a key's send and receive IDs, "11/111".
func ids(k *control.ChainKey) string {
	if k == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", k.SendID, k.RecvID)
}

func stampOr(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return stamp(t)
}
