package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/desired"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
)

func (a *app) plan() *cmd {
	var cfgPath, at, horizon string
	var events int
	fs := a.flagSet("plan", "[--config FILE [--at TIME]] [--events N] [--horizon DURATION]", func(w io.Writer) {
		fmt.Fprint(w, `
Without --config: asks the daemon for its dry run against the keys the
kernel holds now. With --config: computes the plan from the config, policy
and key files alone (no daemon, no TCP-AO kernel needed): each peer's keys
as they would go on a listening socket that holds none yet. Both list the next scheduled key changes per peer.
Nothing is changed. Offline, the keys the key source rejects (in aoctl
validate's words) and each peer left with no key to send with are listed
as problems first, and the exit status is 4: such a peer's plan never
sets ao-required, which would refuse its every connection. Offline,
--timeout bounds the key source's read (Vault included), each step that
adds or deletes a key names it (CHAIN/KEY), and --json gives each step as
an object too (steps: socket, kind, op, key_ref, chain, key, reason, text).
`)
	})
	fs.StringVar(&cfgPath, "config", "", "plan offline from this aokeyd config")
	fs.StringVar(&at, "at", "", "offline: plan as of this time (RFC 3339 or date; default now)")
	fs.IntVar(&events, "events", 3, "offline: upcoming changes listed per peer")
	fs.StringVar(&horizon, "horizon", "365d", "offline: how far ahead to list changes")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 0 {
			return a.usageErr("plan", "unexpected argument %q", fs.Arg(0))
		}
		var rep control.PlanReport
		if cfgPath == "" {
			if at != "" {
				return a.usageErr("plan", "--at needs --config (the daemon plans for now)")
			}
			r, err := a.client().Plan(ctx)
			if err != nil {
				code := a.fail("plan", err)
				if code == exitUnreachable {
					fmt.Fprintln(a.stderr, "(for an offline plan: aoctl plan --config /etc/aokeyd/aokeyd.yaml)")
				}
				return code
			}
			rep = r
		} else {
			now, err := a.instant(at)
			if err != nil {
				return a.usageErr("plan", "--at: %v", err)
			}
			h, err := policy.ParseDuration(horizon)
			if err != nil || h <= 0 || events < 0 {
				return a.usageErr("plan", "--horizon and --events must be positive")
			}
			r, err := offlinePlan(ctx, cfgPath, now, h, a.timeout, events)
			if err != nil {
				fmt.Fprintf(a.stderr, "aoctl plan: %v\n", err)
				var ve validationError
				if errors.As(err, &ve) {
					return exitInvalid
				}
				return exitError
			}
			rep = r
		}
		if a.json {
			if c := a.printJSON(rep); c != exitOK {
				return c
			}
		} else {
			renderPlan(a.stdout, rep, a.now())
		}
		if len(rep.Problems) > 0 {
			// A plan with problems is not one to act on.
			fmt.Fprintf(a.stderr, "aoctl plan: %d problems: fix them first (aoctl validate %s)\n", len(rep.Problems), cfgPath)
			return exitInvalid
		}
		return exitOK
	})
}

func renderPlan(w io.Writer, rep control.PlanReport, now time.Time) {
	src := "daemon, against the keys the kernel holds"
	if !rep.Observed {
		src = "offline: each peer's keys on a listener without keys"
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "Problems (%d):\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Plan at %s (%s):\n", stamp(rep.GeneratedAt), src)
	lines := rep.Plan
	if len(rep.Steps) == len(rep.Plan) {
		// The steps' text names each key (chain/key); a daemon before
		// them sends lines only.
		lines = make([]string, len(rep.Steps))
		for i, s := range rep.Steps {
			lines[i] = s.Text
		}
	}
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
	if len(rep.Plan) == 0 {
		fmt.Fprintln(w, "  nothing to do")
	}
	fmt.Fprintln(w, "\nUpcoming:")
	if len(rep.Upcoming) == 0 {
		if rep.Horizon > 0 {
			fmt.Fprintf(w, "  no scheduled changes within %s\n", policy.FormatDuration(time.Duration(rep.Horizon)))
		} else {
			// The daemon lists every binding's next lifetime boundary.
			fmt.Fprintln(w, "  no scheduled changes: no key's lifetime starts or ends ahead, no migration pending")
		}
		return
	}
	t := newTable(w, "  ", "PEER", "VRF", "CHAIN", "AT", "IN", "ACTION")
	for _, e := range rep.Upcoming {
		t.row(e.Peer, dash(e.VRF), e.Chain, stamp(e.At), human(e.At.Sub(rep.GeneratedAt)), e.Action)
	}
	t.flush()
}

// validationError marks config, policy and key problems (exit status 4).
type validationError struct{ err error }

func (v validationError) Error() string { return v.err.Error() }
func (v validationError) Unwrap() error { return v.err }

// offlinePlan loads the config, policy and key source and plans every
// binding against a socket with no keys.
func offlinePlan(ctx context.Context, path string, now time.Time, horizon, timeout time.Duration, events int) (control.PlanReport, error) {
	rep := control.PlanReport{GeneratedAt: now, Plan: []string{}, Upcoming: []control.Event{}, Horizon: control.Duration(horizon)}
	cfg, err := config.Load(path)
	if err != nil {
		return rep, validationError{err}
	}
	pol, err := cfg.LoadPolicy()
	if err != nil {
		return rep, validationError{err}
	}
	src, err := cfg.OpenKeySource(config.SourceOptions{Now: func() time.Time { return now }})
	if err != nil {
		return rep, err
	}
	defer src.Close()
	snap, err := config.ReadKeySource(ctx, src, timeout)
	if err != nil {
		if errors.Is(err, config.ErrReadTimeout) {
			err = fmt.Errorf("%w; raise aoctl's --timeout, or make the key source answer", err)
		}
		return rep, err
	}
	defer snap.Zero()
	// The keys the source rejects, in aoctl validate's words: the plan
	// is made without them.
	for _, err := range snap.Rejected() {
		rep.Problems = append(rep.Problems, err.Error())
	}

	var inputs []rotator.Input
	var errLines []string
	var errSteps []control.PlanStep
	names := map[rotator.SocketID]map[keyIDs]keyName{}
	for _, b := range pol.Bindings() {
		sock, kind := socketOf(b)
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, now)
		if err != nil {
			l := fmt.Sprintf("%s %s error: %v", sock, kind, err)
			errLines = append(errLines, l)
			errSteps = append(errSteps, control.PlanStep{Socket: string(sock), Kind: kind.String(), Op: "error", Text: l})
			continue
		}
		d := desiredOf(b, pk, snap, sock, kind)
		if _, ok := pk.PreferredKey(); !ok && d.AORequired && pk.MD5 == nil {
			// TCP-AO required with no key to send with refuses every
			// connection of the peer: never planned.
			d.AORequired = false
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s (chain %s): no key to send with at %s: ao-required is not planned (it would refuse every connection of the peer)",
				sock, b.KeyChain, stamp(now)))
		}
		inputs = append(inputs, rotator.Input{Desired: d})
		names[sock] = namesOf(pk, snap)
		for _, k := range d.Keys {
			defer k.Secret.Zero()
		}
		rep.Upcoming = append(rep.Upcoming, upcoming(pol, snap, b, pk, now, horizon, events)...)
	}
	lines, steps := desired.PlanSteps(inputs, bindingNamer(names))
	rep.Plan = append(append(rep.Plan, lines...), errLines...)
	rep.Steps = append(steps, errSteps...)
	slices.SortStableFunc(rep.Upcoming, func(x, y control.Event) int { return x.At.Compare(y.At) })
	return rep, nil
}

// socketOf names the key set a binding plans. aokeyd installs keys on the
// BGP daemon's listening sockets and accepted sessions inherit them (passive
// mode), so offline every binding is planned as its share of a listener.
func socketOf(b policy.Binding) (rotator.SocketID, rotator.Kind) {
	id := "peer " + peerName(b)
	if b.VRF != "" {
		id += " vrf " + b.VRF
	}
	return rotator.SocketID(id), rotator.Listening
}

// peerName is the neighbor address of a host binding, else its prefix.
func peerName(b policy.Binding) string {
	if b.Neighbor.IsSingleIP() {
		return b.Neighbor.Addr().String()
	}
	return b.Neighbor.String()
}

// desiredOf converts the policy's answer into the planner's input. The
// VRF's ifindex is unknown offline: keys are planned for ifindex 0.
func desiredOf(b policy.Binding, pk policy.PeerKeys, snap *keystore.Snapshot, sock rotator.SocketID, kind rotator.Kind) rotator.Desired {
	return desired.Socket(pk, snap, b.Neighbor, 0, pk.Preferred, sock, kind)
}

// upcoming lists the binding's next changes of desired keys within the
// horizon, and for a generated chain when its next key is due.
func upcoming(pol *policy.Policy, snap *keystore.Snapshot, b policy.Binding, pk policy.PeerKeys, now time.Time, horizon time.Duration, n int) []control.Event {
	var out []control.Event
	ev := func(at time.Time, action string) {
		out = append(out, control.Event{Peer: peerName(b), VRF: b.VRF, Chain: b.KeyChain, At: at, Action: action})
	}
	end := now.Add(horizon)
	if s, ok := pol.Schedule(b.KeyChain); ok {
		due := s.NextDue(b.Neighbor.Addr(), now)
		ev(due.AcceptLifetime.Start, fmt.Sprintf("key for rotation %d due in the source (sent from %s)", due.Index, stamp(due.SendStart)))
	}
	prev := pk
	for i := 0; i < n && !prev.NextChange.IsZero() && prev.NextChange.Before(end); i++ {
		at := prev.NextChange
		next, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, at)
		if err != nil {
			ev(at, "error: "+err.Error())
			break
		}
		if a := diffKeys(prev, next); a != "" {
			ev(at, a)
		} else {
			i--
		}
		prev = next
	}
	return out
}

// diffKeys describes what changes from one desired state to the next.
func diffKeys(a, b policy.PeerKeys) string {
	names := func(pk policy.PeerKeys) map[string]bool {
		m := map[string]bool{}
		for _, k := range pk.Keys {
			m[k.MKT.Name] = k.Sendable
		}
		return m
	}
	pref := func(pk policy.PeerKeys) string {
		if k, ok := pk.PreferredKey(); ok {
			return k.MKT.Name
		}
		return ""
	}
	an, bn := names(a), names(b)
	var parts []string
	for _, k := range b.Keys {
		if _, ok := an[k.MKT.Name]; !ok {
			parts = append(parts, "install "+k.MKT.Name)
		}
	}
	if pa, pb := pref(a), pref(b); pa != pb {
		if pb == "" {
			parts = append(parts, "no key to send with")
		} else {
			parts = append(parts, "send with "+pb)
		}
	}
	for _, k := range a.Keys {
		if _, ok := bn[k.MKT.Name]; !ok {
			parts = append(parts, "remove "+k.MKT.Name)
		}
	}
	return strings.Join(parts, ", ")
}
