package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) replace(ctx context.Context, args []string) int {
	fs := a.flagSet("replace", "CHAIN/KEY", func(w io.Writer) {
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
Exit status 1 when a socket could not be changed; 5 when the caller is not
in the control socket's admin group.
`)
	})
	if code, ok := a.parse(fs, args, true); !ok {
		return code
	}
	chain, key, code, ok := a.keyArg("replace", fs)
	if !ok {
		return code
	}
	res, err := a.client().Replace(ctx, control.ReplaceRequest{Chain: chain, Key: key})
	if err != nil {
		return a.fail("replace", err)
	}
	code = exitOK
	if res.Failed() {
		code = exitError
	}
	if a.json {
		if c := a.printJSON(res); c != exitOK {
			return c
		}
		return code
	}
	fmt.Fprintf(a.stdout, "Replace %s/%s: %d sockets in %s\n", res.Chain, res.Key, len(res.Sockets), time.Duration(res.Elapsed))
	if len(res.Sockets) > 0 {
		t := newTable(a.stdout, "", "SOCKET", "PEER", "ACTION", "ERROR")
		for _, s := range res.Sockets {
			t.row(s.Socket, dash(s.Peer), string(s.Action), dash(s.Error))
		}
		t.flush()
	}
	return code
}
