package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// versionReport is `aoctl version --json`.
type versionReport struct {
	Aoctl string `json:"aoctl"`
	// Aokeyd is the daemon's version as its control socket reports it;
	// "" when it did not answer (DaemonError says why).
	Aokeyd      string    `json:"aokeyd,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Socket      string    `json:"socket"`
	DaemonError string    `json:"daemon_error,omitempty"`
}

func (a *app) versionCmd() *cmd {
	fs := a.flagSet("version", "[--json]", func(w io.Writer) {
		fmt.Fprint(w, `
Prints aoctl's version and, when the daemon answers on its control socket,
aokeyd's (with when it started): after an upgrade the two differ until
aokeyd is restarted. A daemon that does not answer is said so and is no
failure: the exit status is 0.
`)
	})
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 0 {
			return a.usageErr("version", "unexpected argument %q", fs.Arg(0))
		}
		rep := versionReport{Aoctl: version, Socket: a.socket}
		h, err := a.client().Health(ctx)
		if err != nil {
			rep.DaemonError = err.Error()
		} else {
			rep.Aokeyd, rep.Started = h.Version, h.Started
			if rep.Aokeyd == "" {
				rep.Aokeyd = "unknown"
			}
		}
		if a.json {
			return a.printJSON(rep)
		}
		fmt.Fprintf(a.stdout, "aoctl %s\n", rep.Aoctl)
		switch {
		case err != nil:
			fmt.Fprintf(a.stdout, "aokeyd: no answer on %s (%v)\n", rep.Socket, err)
		case !rep.Started.IsZero():
			fmt.Fprintf(a.stdout, "aokeyd %s, started %s\n", rep.Aokeyd, when(rep.Started, a.now()))
		default:
			fmt.Fprintf(a.stdout, "aokeyd %s\n", rep.Aokeyd)
		}
		if err == nil && rep.Aokeyd != rep.Aoctl {
			fmt.Fprintln(a.stdout, "(aoctl and aokeyd differ: restart aokeyd after an upgrade)")
		}
		return exitOK
	})
}
