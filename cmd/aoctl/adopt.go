package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) adopt() *cmd {
	var vrf, prefix string
	fs := a.flagSet("adopt", "PEER [--vrf VRF] [--prefix PREFIX]", func(w io.Writer) {
		fmt.Fprint(w, `
Hands the keys another agent installed for PEER (on its session's socket
and on the speaker's listeners) to aokeyd. aokeyd never deletes or changes
a key it did not install: such a foreign key is kept and shown in status
and plan, and one whose IDs a desired key has freezes that peer's roll.
After adopt aokeyd treats the keys as its own: it keeps them while they
are desired or carry the session and retires them otherwise. Nothing is
deleted by this command itself; the next pass plans with the keys adopted.

Only the keys of PEER's host prefix (192.0.2.2/32) are taken. A key of a
wider prefix (a listener entry for 192.0.2.0/24) serves every neighbor in
it and is only listed; --prefix names such a prefix to take its keys
instead, which is refused while another neighbor relies on it (an
established session inside it, or a neighbor inside it that aokeyd does
not manage).
`)
	})
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	fs.StringVar(&prefix, "prefix", "", "take the keys of this wider prefix containing PEER instead of its host prefix's")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 1 {
			return a.usageErr("adopt", "name one PEER")
		}
		res, err := a.client().Adopt(ctx, control.AdoptRequest{Peer: fs.Arg(0), VRF: vrf, Prefix: prefix})
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
		if len(res.Left) > 0 {
			fmt.Fprintf(a.stdout, "%d foreign keys for the peer under another prefix left foreign (adopt PEER takes its host prefix's, --prefix PREFIX a wider prefix's)\n", len(res.Left))
			t := newTable(a.stdout, "", "SOCKET", "PREFIX", "SEND", "RECV")
			for _, k := range res.Left {
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
