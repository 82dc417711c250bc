package main

import (
	"context"
	"fmt"
	"io"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) rotate() *cmd {
	var all bool
	var vrf string
	fs := a.flagSet("rotate", "PEER [--vrf VRF] | --all", func(w io.Writer) {
		fmt.Fprint(w, `
Starts a rotation now: the daemon installs the peer's preferred key if
needed, announces it with RNext, and switches once the peer sends with it.
Exit status 1 when a peer could not start.
`)
	})
	fs.BoolVar(&all, "all", false, "every peer")
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	return a.cmd(fs, func(ctx context.Context) int {
		switch {
		case all && fs.NArg() > 0:
			return a.usageErr("rotate", "PEER and --all exclude each other")
		case !all && fs.NArg() != 1:
			return a.usageErr("rotate", "name one PEER, or --all")
		}
		res, err := a.client().Rotate(ctx, control.RotateRequest{Peer: fs.Arg(0), VRF: vrf, All: all})
		if err != nil {
			return a.fail("rotate", err)
		}
		code := exitOK
		for _, p := range res.Peers {
			if p.Error != "" {
				code = exitError
			}
		}
		if a.json {
			return a.printJSONCode(res, code)
		}
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
		return code
	})
}
