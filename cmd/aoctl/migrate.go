package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) migrate() *cmd {
	var all, abort bool
	var vrf, at string
	var bound time.Duration
	fs := a.flagSet("migrate", "PEER [--vrf VRF] | --all  [--at TIME] [--bound DURATION] [--abort]", func(w io.Writer) {
		fmt.Fprint(w, `
Moves a TCP-MD5 peer (its key chain holds an md5 password and TCP-AO keys)
to TCP-AO, one reconnect per session. aokeyd puts the peer's TCP-AO keys on
the speaker's listener beside its TCP-MD5 key at once (the listener then
takes either kind from the peer, never an unsigned SYN); the far end
switches at --at (render its change with aoctl peer-config --migrate);
when a session of the peer runs TCP-AO, the TCP-MD5 key leaves the
listener. Without a TCP-AO session by --at plus --bound, aokeyd takes the
TCP-AO keys off again, keeps TCP-MD5, says why in status and does not try
again until told. --abort rolls a migration in progress back now.
`)
	})
	fs.BoolVar(&all, "all", false, "every TCP-MD5 peer")
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	fs.StringVar(&at, "at", "", "the agreed switch time (RFC 3339 or date; default now)")
	fs.DurationVar(&bound, "bound", 0, "how long after the switch time the TCP-AO session may take (default the daemon's, 5m)")
	fs.BoolVar(&abort, "abort", false, "roll the migration back now")
	return a.cmd(fs, func(ctx context.Context) int {
		switch {
		case all && fs.NArg() > 0:
			return a.usageErr("migrate", "PEER and --all exclude each other")
		case !all && fs.NArg() != 1:
			return a.usageErr("migrate", "name one PEER, or --all")
		}
		req := control.MigrateRequest{Peer: fs.Arg(0), VRF: vrf, All: all, Bound: control.Duration(bound), Abort: abort}
		if at != "" {
			t, err := a.instant(at)
			if err != nil {
				return a.usageErr("migrate", "--at: %v", err)
			}
			req.At = t
		}
		res, err := a.client().Migrate(ctx, req)
		if err != nil {
			return a.fail("migrate", err)
		}
		if a.json {
			return a.printJSON(res)
		}
		now := a.now()
		if len(res.Migrations) == 0 {
			fmt.Fprintln(a.stdout, "No TCP-MD5 peer to migrate.")
			return exitOK
		}
		t := newTable(a.stdout, "", "PEER", "VRF", "STEP", "PREFIX", "SWITCH", "ROLLBACK", "DETAIL")
		for _, m := range res.Migrations {
			t.row(m.Peer, dash(m.VRF), m.Step, m.Prefix, when(m.At, now), when(m.Deadline, now), dash(m.Reason))
		}
		t.flush()
		return exitOK
	})
}
