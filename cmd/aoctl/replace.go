package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) replace() *cmd {
	var md5 bool
	fs := a.flagSet("replace", "CHAIN/KEY | CHAIN --md5", func(w io.Writer) {
		fmt.Fprint(w, `
Approves an edit in place: new material (secret, algorithm, MAC length or
tcp_options) that the key source has under the IDs of an installed key.
aokeyd holds such an edit back on every socket, since the established
session cannot take a second key with the same IDs and applying it to the
listener alone would strand the next reconnect. After this command the
listeners take the new material; each session takes it in place when its
peer was seen using another key, and is reset otherwise (it reconnects
through the listener with the new material: the far end must have it).
A later edit of the same key is held back again. Prefer giving new
material new IDs and letting aokeyd roll to it: that needs no reset.
With --md5 it applies the chain's changed TCP-MD5 password, which aokeyd
holds back too (a TCP-MD5 session has one password for its life): the
listeners take it, and each of the chain's TCP-MD5 peers' sessions is
reset to reconnect with it. Run it at the time agreed with the far end,
which must change its password at the same moment.
Exit status 1 when a socket could not be changed; 5 when the caller is not
in the control socket's admin group.
`)
	})
	fs.BoolVar(&md5, "md5", false, "apply the chain's changed TCP-MD5 password (resets its TCP-MD5 sessions)")
	return a.cmd(fs, func(ctx context.Context) int {
		var req control.ReplaceRequest
		if md5 {
			if fs.NArg() != 1 || strings.Contains(fs.Arg(0), "/") {
				return a.usageErr("replace", "with --md5 name one CHAIN")
			}
			req = control.ReplaceRequest{Chain: fs.Arg(0), MD5: true}
		} else {
			chain, key, code, ok := a.keyArg("replace", fs)
			if !ok {
				return code
			}
			req = control.ReplaceRequest{Chain: chain, Key: key}
		}
		res, err := a.client().Replace(ctx, req)
		if err != nil {
			return a.fail("replace", err)
		}
		code := exitOK
		if res.Failed() {
			code = exitError
		}
		if a.json {
			return a.printJSONCode(res, code)
		}
		what := res.Chain + "/" + res.Key
		if req.MD5 {
			what = res.Chain + " TCP-MD5 password"
		}
		fmt.Fprintf(a.stdout, "Replace %s: %d sockets in %s\n", what, len(res.Sockets), time.Duration(res.Elapsed))
		if len(res.Sockets) > 0 {
			t := newTable(a.stdout, "", "SOCKET", "PEER", "ACTION", "ERROR")
			for _, s := range res.Sockets {
				t.row(s.Socket, dash(s.Peer), string(s.Action), dash(s.Error))
			}
			t.flush()
		}
		return code
	})
}
