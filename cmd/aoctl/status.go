package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) status() *cmd {
	var brief, keys bool
	var vrf string
	fs := a.flagSet("status", "[PEER [--vrf VRF]] [--brief | --keys] [--watch [--interval D] [--every]] [--json]", func(w io.Writer) {
		fmt.Fprint(w, `
Without PEER: a summary line per peer, then each peer's details. PEER is an
address: the peer in every VRF that has it, or with --vrf in that one (the
same address in two VRFs is two peers).
Keys marked * under CUR are Current_key (we send with it), under RNEXT the
key we ask the peer to send with; OPTS is the key's tcp_options (include or
exclude: whether the MAC covers TCP options; both ends must agree).
Listener: the listening sockets' keys for the peer's address with their
good/bad segment counts (SHARED: the key's prefix covers other peers too, so
its counts are theirs as well), and the listeners' own counters, which all
peers share. Warnings: peer not passive while nothing keys the BGP daemon's
connects to it (aokeyd exec does), optmem_max too small, key source
stale, no Current_key, segments from the peer failing verification on the
listener while its session is down, a kernel with a known TCP-AO defect
(the defect, the releases that fix it and what aokeyd does meanwhile).
Neighbor: the peer's AS, description, flaps, and when and why its session
last went down, as the BGP speaker reports them. Keys in use: the key we
send with (the kernel's Current_key, which the peer's RNextKeyID selects)
and the key the peer sends with (our RNext_key, the key we ask it to send
with; during a roll, the one before until the peer takes the new one).
NEXT is when the peer's rotation acts next, as a time and from now.
--watch keeps asking every --interval and prints the status again, under
a line with the time, whenever what it shows changed (counters, uptimes
and other clocks alone are no change; --every prints each time), until
interrupted (Ctrl-C: exit status 0); with --json one object per line.
--keys shows the key chains instead, as Junos' show security keychain
does: per chain the key sent with now, the next one and from when, and
the chain's keys with their lifetimes.
Start-up gate: after a start, until the speaker's sessions are listed and
each one up is read, the listener sync deletes no key but a revoked one
(aoctl plan lists what it holds back as held).
Edits in place: a key the key source changed under the same IDs, on the
session and on the listener, and the rule that decided it: applied when
the installed key authenticated nothing, or (listener) when the peer is
down and its connections fail against it; held while it authenticated
something, before the sessions are read after a start, or (session) until
the peer is seen to choose its key.
`)
	})
	var watch, every bool
	interval := defaultWatchInterval
	fs.BoolVar(&brief, "brief", false, "summary table only")
	fs.BoolVar(&watch, "watch", false, "keep watching: print again whenever what status shows changes, until interrupted")
	fs.DurationVar(&interval, "interval", interval, "with --watch: how often to ask the daemon")
	fs.BoolVar(&every, "every", false, "with --watch: print every --interval, changed or not")
	fs.BoolVar(&keys, "keys", false, "the key chains: per chain the key sent with now, the next one and from when")
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF (with PEER)")
	return a.cmd(fs, func(ctx context.Context) int {
		switch {
		case fs.NArg() > 1:
			return a.usageErr("status", "at most one PEER")
		case keys && (fs.NArg() > 0 || brief):
			return a.usageErr("status", "--keys shows the key chains: it takes neither PEER nor --brief")
		case interval <= 0:
			return a.usageErr("status", "--interval must be positive")
		case every && !watch:
			return a.usageErr("status", "--every goes with --watch")
		}
		which := fs.Arg(0)
		if vrf != "" {
			addr, err := netip.ParseAddr(which)
			if err != nil {
				return a.usageErr("status", "--vrf needs PEER as an address: %v", err)
			}
			which = peer.KeyOf(addr, vrf).String()
		}
		v := statusView{brief: brief, keys: keys, single: fs.NArg() == 1}
		if watch {
			return a.watchStatus(ctx, which, v, interval, every)
		}
		rep, err := a.daemon().Status(ctx, which)
		if err != nil {
			return a.fail("status", err)
		}
		if a.json {
			return a.printJSON(v.jsonOf(rep))
		}
		v.render(a.stdout, rep, a.now())
		return exitOK
	})
}

// statusView is what status shows of a report: every peer, one (single),
// the summary alone (brief), or the key chains (keys).
type statusView struct{ brief, keys, single bool }

// jsonOf is what --json prints of rep.
func (v statusView) jsonOf(rep control.StatusReport) any {
	if v.keys {
		return chainsReport{GeneratedAt: rep.GeneratedAt, Chains: rep.Chains}
	}
	return rep
}

// render writes rep's text.
func (v statusView) render(w io.Writer, rep control.StatusReport, now time.Time) {
	if v.keys {
		renderChains(w, rep, now)
		return
	}
	renderStatus(w, rep, now, v.brief, v.single)
}

// renderStatus writes the status tables. single skips the summary.
func renderStatus(w io.Writer, rep control.StatusReport, now time.Time, brief, single bool) {
	if rep.Speaker != "" {
		fmt.Fprintf(w, "Speaker: %s (sessions as it reports them)\n", rep.Speaker)
	}
	ks := rep.KeySource
	fmt.Fprintf(w, "Key source: %s, last sync %s", dash(ks.Name), when(ks.LastSync, now))
	if ks.Stale {
		fmt.Fprint(w, " STALE")
	}
	fmt.Fprintln(w)
	if ks.LastError != "" {
		fmt.Fprintf(w, "  last error: %s\n", ks.LastError)
	}
	if rep.Optmem.Limit > 0 {
		fmt.Fprintf(w, "optmem_max: %d bytes, keys need %d\n", rep.Optmem.Limit, rep.Optmem.Needed)
	}
	if k := rep.Kernel; k != nil {
		fmt.Fprintf(w, "Kernel: %s, TCP-AO algorithms %s", k.Release, strings.Join(k.Accepted, " "))
		if len(k.Refused) > 0 {
			fmt.Fprintf(w, "; refuses %s", strings.Join(k.Refused, " "))
		}
		fmt.Fprintln(w)
	}
	if g := rep.StartUpGate; g != nil {
		fmt.Fprintf(w, "Start-up gate: %s\n", g.Text())
	}
	for _, wn := range rep.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", wn)
	}
	if len(ks.Held) > 0 {
		fmt.Fprintln(w, "\nHeld back (the key source lost these; installed keys are kept):")
		t := newTable(w, "  ", "CHAIN", "KEY", "REASON", "FIELD", "LAST GOOD", "SOURCE")
		for _, h := range ks.Held {
			lastGood := "kept"
			if !h.LastGood {
				lastGood = "unknown"
			}
			t.row(h.Chain, dash(h.Key), h.Reason, dash(h.Field), lastGood, dash(h.Source))
		}
		t.flush()
	}
	if len(rep.Peers) == 0 {
		fmt.Fprintln(w, "\nNo peers.")
		return
	}
	if !single {
		fmt.Fprintln(w)
		t := newTable(w, "", "PEER", "VRF", "AS", "SESSION", "AUTH", "UP", "FLAPS", "KEYS", "SENDING", "PEER-SENDS", "ROTATION", "NEXT", "WARN")
		for _, p := range rep.Peers {
			u := keysInUse(p)
			as := "-"
			if p.PeerAS != 0 {
				as = strconv.FormatUint(uint64(p.PeerAS), 10)
			}
			t.row(p.Shown(), dash(p.VRF), as, dash(p.SessionState), dash(p.Auth), human(time.Duration(p.Uptime)), strconv.FormatUint(uint64(p.Flaps), 10),
				strconv.Itoa(len(p.Keys)), u.sendingShort(), u.peerShort(), dash(p.Rotation.State), when(p.Rotation.NextAt, now), strconv.Itoa(len(p.Warnings)))
		}
		t.flush()
	}
	if brief {
		return
	}
	for _, p := range rep.Peers {
		fmt.Fprintln(w)
		renderPeer(w, p, now)
	}
}

func renderPeer(w io.Writer, p control.PeerStatus, now time.Time) {
	fmt.Fprintf(w, "Peer %s", p.Shown())
	if p.VRF != "" {
		fmt.Fprintf(w, " vrf %s", p.VRF)
	}
	fmt.Fprintf(w, ": session %s", dash(p.SessionState))
	if p.Auth != "" {
		fmt.Fprintf(w, ", auth %s", p.Auth)
	}
	fmt.Fprintf(w, ", up %s, passive %s", human(time.Duration(p.Uptime)), yesno(p.Passive))
	if p.ActiveOpensKeyed {
		fmt.Fprint(w, ", active opens keyed")
	}
	fmt.Fprintln(w)
	renderNeighbor(w, p, now)
	renderKeysInUse(w, p)
	if m := p.Migration; m != nil {
		fmt.Fprintf(w, "  Migration to TCP-AO: %s since %s, TCP-AO at %s, switch %s, roll-back %s", m.Step, stamp(m.Since), m.Prefix,
			when(m.At, now), when(m.Deadline, now))
		if m.Reason != "" {
			fmt.Fprintf(w, ": %s", m.Reason)
		}
		fmt.Fprintln(w)
	}
	if len(p.Sockets) > 0 {
		fmt.Fprintln(w, "  Sockets:")
		t := newTable(w, "    ", "KIND", "LOCAL", "REMOTE", "INODE")
		for _, s := range p.Sockets {
			t.row(s.Kind, dash(s.Local), dash(s.Remote), strconv.FormatUint(s.Inode, 10))
		}
		t.flush()
	} else {
		fmt.Fprintln(w, "  Sockets: none")
	}
	if len(p.Keys) > 0 {
		fmt.Fprintln(w, "  Keys:")
		t := newTable(w, "    ", "CHAIN", "KEY", "SEND", "RECV", "ALG", "MAC", "OPTS", "SEND-LIFETIME", "ACCEPT-LIFETIME",
			"STATE", "CUR", "RNEXT", "GOOD", "BAD")
		for _, k := range p.Keys {
			t.row(k.Chain, k.Name, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID)), k.Alg, strconv.Itoa(int(k.MACLen)),
				dash(k.TCPOptions), lifetime(k.SendLifetime), lifetime(k.AcceptLifetime), dash(k.State), mark(k.Current), mark(k.RNext),
				strconv.FormatUint(k.PktGood, 10), strconv.FormatUint(k.PktBad, 10))
		}
		t.flush()
	} else {
		fmt.Fprintln(w, "  Keys: none")
	}
	r := p.Rotation
	fmt.Fprintf(w, "  Rotation: %s", dash(r.State))
	if !r.Since.IsZero() {
		fmt.Fprintf(w, " since %s", when(r.Since, now))
	}
	if r.PendingKey != "" {
		fmt.Fprintf(w, ", pending %s", r.PendingKey)
	}
	fmt.Fprintln(w)
	if r.Waiting != "" {
		fmt.Fprintf(w, "  Waiting for: %s\n", r.Waiting)
	}
	if r.NextAction != "" {
		fmt.Fprintf(w, "  Next: %s at %s\n", r.NextAction, when(r.NextAt, now))
	}
	if r.LastAbortReason != "" || r.LastAbort != "" {
		fmt.Fprintf(w, "  Last abort: %s: %s\n", dash(r.LastAbortReason), r.LastAbort)
	}
	if er := p.EarlyRoll; er != nil {
		fmt.Fprintf(w, "  aoctl rotate (asked %s): %s\n", when(er.AskedAt, now), earlyRollText(p, *er, now))
	}
	c := p.Counters
	fmt.Fprintf(w, "  Counters: good %d, bad %d, key-not-found %d, ao-required %d, dropped-icmp %d\n",
		c.PktGood, c.PktBad, c.PktKeyNotFound, c.PktAORequired, c.PktDroppedICMP)
	renderListener(w, p.Listener)
	renderEdits(w, p.Edits)
	for _, wn := range p.Warnings {
		fmt.Fprintf(w, "  WARNING: %s\n", wn)
	}
}

// earlyRollText says where the peer's aoctl rotate stands.
func earlyRollText(p control.PeerStatus, er control.EarlyRoll, now time.Time) string {
	key := er.Key.String()
	switch er.State {
	case control.EarlyRolling:
		return fmt.Sprintf("rolling to %s ahead of its send start %s", key, when(er.KeyStart, now))
	case control.EarlyHeld:
		return fmt.Sprintf("rolled to %s; sending with it ahead of the schedule, which sends with it from %s", key, when(er.KeyStart, now))
	case control.EarlyEnded:
		return fmt.Sprintf("the roll to %s ended %s: %s; the schedule governs, nothing is retried (aoctl rotate %s asks again)",
			key, when(er.EndedAt, now), dash(er.Ended), rotateArgs(p.Peer, p.VRF))
	}
	return er.State + " " + key
}

// renderEdits writes the edits in place of the peer's keys and the rule
// that decided each (control.EditRule's text).
func renderEdits(w io.Writer, es []control.EditStatus) {
	if len(es) == 0 {
		return
	}
	fmt.Fprintln(w, "  Edits in place (new material under an installed key's IDs):")
	for _, e := range es {
		key := fmt.Sprintf("send=%d recv=%d", e.SendID, e.RecvID)
		if e.Key != "" {
			key = fmt.Sprintf("%s/%s (%s)", e.Chain, e.Key, key)
		}
		fmt.Fprintf(w, "    %s on the %s: %s\n", key, e.Socket, e.Rule.Text())
	}
}

// renderListener writes the listening sockets' counters for one peer.
func renderListener(w io.Writer, l *control.ListenerCounters) {
	if l == nil {
		return
	}
	if len(l.Keys) > 0 {
		fmt.Fprintln(w, "  Listener keys for the peer:")
		t := newTable(w, "    ", "SOCKET", "PREFIX", "SEND", "RECV", "OPTS", "GOOD", "BAD", "SHARED")
		for _, k := range l.Keys {
			t.row(k.Socket, k.Prefix, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID)), dash(k.TCPOptions),
				strconv.FormatUint(k.PktGood, 10), strconv.FormatUint(k.PktBad, 10), yesno(k.Shared))
		}
		t.flush()
	} else {
		fmt.Fprintln(w, "  Listener keys for the peer: none")
	}
	fmt.Fprintf(w, "  Listener sockets (all peers): bad %d, key-not-found %d, ao-required %d, dropped-icmp %d\n",
		l.PktBad, l.PktKeyNotFound, l.PktAORequired, l.PktDroppedICMP)
}
