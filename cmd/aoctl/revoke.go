package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

func (a *app) revoke() *cmd {
	var peer, vrf string
	fs := a.flagSet("revoke", "CHAIN/KEY [--peer PEER [--vrf VRF]]", func(w io.Writer) {
		fmt.Fprint(w, `
Emergency revoke: the daemon records the revocation durably (it fails, and
touches nothing, when it cannot), marks the key revoked in the key source
and removes it from every socket at once. With --peer only that peer's
session and its own listener entries lose the key, and the key source
(shared by every peer) is not written; a peer no binding covers is an
error. PEER is an address, or an interface neighbour's interface (swp1). A key that is Current_key is force-deleted naming a replacement; if
it is a peer's only key the policy's on_revoke_only_key decides (kept:
alert, reset: the session drops). Prints each socket's outcome and the
wall time. Exit status 1 unless the key is gone everywhere it was asked to
go (and, for a global revoke, revoked in the source); 5 when the caller is
not in the control socket's admin group.
`)
	})
	fs.StringVar(&peer, "peer", "", "only this peer's sockets (an address, or an interface neighbour's interface)")
	fs.StringVar(&vrf, "vrf", "", "the peer's VRF")
	return a.cmd(fs, func(ctx context.Context) int {
		chain, key, code, ok := a.keyArg("revoke", fs)
		if !ok {
			return code
		}
		res, err := a.client().Revoke(ctx, control.RevokeRequest{Chain: chain, Key: key, Peer: peer, VRF: vrf})
		if err != nil {
			return a.fail("revoke", err)
		}
		code = exitOK
		if res.Failed() {
			code = exitError
		}
		if a.json {
			return a.printJSONCode(res, code)
		}
		src := "revoked"
		if !res.SourceRevoked {
			src = "NOT revoked"
		}
		if res.SourceError != "" {
			src += " (" + res.SourceError + ")"
		}
		what := res.Chain + "/" + res.Key
		if res.Peer != "" {
			what += " for peer " + res.Peer
			if res.VRF != "" {
				what += " (vrf " + res.VRF + ")"
			}
			src = "not written (a peer-scoped revoke)"
		}
		fmt.Fprintf(a.stdout, "Revoke %s: %d sockets in %s; key source: %s\n", what, len(res.Sockets),
			time.Duration(res.Elapsed), src)
		if res.RecordError != "" {
			fmt.Fprintf(a.stdout, "Record: in force, but %s\n", res.RecordError)
		}
		if len(res.Sockets) > 0 {
			t := newTable(a.stdout, "", "SOCKET", "PEER", "ACTION", "REPLACEMENT", "ERROR")
			for _, s := range res.Sockets {
				msg := s.Error
				if msg == "" && s.Warning != "" {
					msg = "warning: " + s.Warning // not a failure: the revoked key is not there
				}
				t.row(s.Socket, dash(s.Peer), string(s.Action), dash(s.Replacement), dash(msg))
			}
			t.flush()
		}
		return code
	})
}

// keyArg is the one CHAIN/KEY argument of command cmd (revoke, replace,
// fleet revoke); !ok with the usage error's exit code otherwise.
func (a *app) keyArg(cmd string, fs *flag.FlagSet) (chain, key string, code int, ok bool) {
	if fs.NArg() != 1 {
		return "", "", a.usageErr(cmd, "name one key as CHAIN/KEY"), false
	}
	chain, key, ok = strings.Cut(fs.Arg(0), "/")
	if !ok || chain == "" || key == "" {
		return "", "", a.usageErr(cmd, "%q: name the key as CHAIN/KEY", fs.Arg(0)), false
	}
	return chain, key, 0, true
}
