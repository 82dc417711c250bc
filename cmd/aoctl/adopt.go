package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) adopt() *cmd {
	var vrf string
	fs := a.flagSet("adopt", "PEER [--vrf VRF]", func(w io.Writer) {
		fmt.Fprint(w, `
Hands the keys another agent installed for PEER (on its session's socket
and on the speaker's listeners) to aokeyd. aokeyd never deletes or changes
a key it did not install: such a foreign key is kept and shown in status
and plan, and one whose IDs a desired key has freezes that peer's roll.
After adopt aokeyd treats the keys as its own: it keeps them while they
are desired or carry the session and retires them otherwise. Nothing is
deleted by this command itself; the next pass plans with the keys adopted.
`)
	})
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 1 {
			return a.usageErr("adopt", "name one PEER")
		}
		res, err := a.client().Adopt(ctx, control.AdoptRequest{Peer: fs.Arg(0), VRF: vrf})
		if err != nil {
			return a.fail("adopt", err)
		}
		if a.json {
			return a.printJSON(res)
		}
		fmt.Fprintf(a.stdout, "Adopt %s: %d foreign keys handed to aokeyd\n", peerLabel(res.Peer, res.VRF), len(res.Adopted))
		if len(res.Adopted) > 0 {
			t := newTable(a.stdout, "", "SOCKET", "PREFIX", "SEND", "RECV")
			for _, k := range res.Adopted {
				t.row(k.Socket, k.Prefix, strconv.Itoa(int(k.SendID)), strconv.Itoa(int(k.RecvID)))
			}
			t.flush()
		}
		return exitOK
	})
}

// peerLabel is a peer's address with its VRF when it has one.
func peerLabel(addr, vrf string) string {
	if vrf == "" {
		return addr
	}
	return addr + " (vrf " + vrf + ")"
}
