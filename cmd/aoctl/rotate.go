package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// defaultRollWait bounds rotate --wait without --timeout: a roll takes the
// policy's switch timeout (2m by default) and grace period (1m) at most,
// and a retry after an abort is no longer this roll.
const defaultRollWait = 10 * time.Minute

func (a *app) rotate() *cmd {
	var all, wait bool
	var vrf string
	fs := a.flagSet("rotate", "PEER [--vrf VRF] | --all [--wait]", func(w io.Writer) {
		fmt.Fprint(w, `
Starts a rotation now, to the newest key the key source holds for the
peer, ahead of its send start: the daemon installs it if needed, announces
it with RNext, and switches once the peer sends with it. It rolls to that
key once: the peer then keeps it until the schedule sends with it, also
across restarts of aokeyd (the request is recorded before the roll
starts); a key added later waits for the schedule or another aoctl
rotate; a roll that aborts, or whose session goes down, is not retried
(the schedule governs again; aoctl status says why). Exit status 1 when a
peer could not start.
With --wait it then prints each step as the peer takes it (started,
announced, switched, completed; or aborted, with the reason, or the
session going down) and exits when every roll it started has ended:
status 0 when each completed, 1 when one aborted, its session went down
or it did not end within --timeout (default with --wait: 10m; the roll
goes on, aoctl status shows it). --json then prints one object at the end:
the rotation's outcomes and each roll's steps and result.
`)
	})
	fs.BoolVar(&all, "all", false, "every peer")
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	fs.BoolVar(&wait, "wait", false, "follow each roll started until it completes or fails")
	return a.cmd(fs, func(ctx context.Context) int {
		switch {
		case all && fs.NArg() > 0:
			return a.usageErr("rotate", "PEER and --all exclude each other")
		case !all && fs.NArg() != 1:
			return a.usageErr("rotate", "name one PEER, or --all")
		}
		res, err := a.daemon().Rotate(ctx, control.RotateRequest{Peer: fs.Arg(0), VRF: vrf, All: all})
		if err != nil {
			return a.fail("rotate", err)
		}
		code := exitOK
		for _, p := range res.Peers {
			if p.Error != "" {
				code = exitError
			}
		}
		if !a.json {
			now := a.now()
			t := newTable(a.stdout, "", "PEER", "VRF", "STARTED", "STATE", "NEXT", "DETAIL")
			for _, p := range res.Peers {
				detail := p.Detail
				if p.Error != "" {
					detail = "error: " + p.Error
				}
				t.row(p.Peer, dash(p.VRF), yesno(p.Started), dash(p.State), when(p.NextAt, now), dash(detail))
			}
			t.flush()
		}
		if !wait {
			if a.json {
				return a.printJSONCode(res, code)
			}
			return code
		}
		bound := defaultRollWait
		if a.timeoutSet {
			bound = a.timeout
		}
		rolls, ok := a.followRolls(ctx, res, bound)
		if !ok {
			code = exitError
		}
		if a.json {
			return a.printJSONCode(rotateWaitReport{Rotate: res, Rolls: rolls}, code)
		}
		return code
	})
}
