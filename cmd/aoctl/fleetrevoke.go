package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/hashicorp/vault/api"
)

// who names the operator for the revocation record: the token's display
// name (and entity, when Vault has one), else $USER.
func (a *app) who(ctx context.Context, st fleet.Store) string {
	var name string
	_ = st.V.WithClient(ctx, func(c *api.Client) error {
		sec, err := c.Auth().Token().LookupSelfWithContext(ctx)
		if err != nil || sec == nil {
			return err
		}
		if dn, _ := sec.Data["display_name"].(string); dn != "" {
			name = "vault:" + dn
		}
		if id, _ := sec.Data["entity_id"].(string); id != "" && name != "" {
			name += " (entity " + id + ")"
		}
		return nil
	})
	if u := a.getenv("USER"); u != "" {
		if name == "" {
			return "user:" + u
		}
		return name + " as user:" + u
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			return "user:" + u.Username
		}
		return "unknown"
	}
	return name
}

// RouterRevoke is one router's view of a fleet revocation.
type RouterRevoke struct {
	Router string    `json:"router"`
	Seen   time.Time `json:"seen,omitzero"`
	Clean  time.Time `json:"clean,omitzero"`
	// CleanAfter is from the Vault write to clean (seconds in JSON).
	CleanAfter control.Duration `json:"clean_after,omitempty"`
	Sockets    int              `json:"sockets"`
	Note       string           `json:"note,omitempty"`
}

// RevokeReport is `aoctl fleet revoke --json`.
type RevokeReport struct {
	Revocation fleet.Revocation `json:"revocation"`
	Already    bool             `json:"already"`
	Version    int              `json:"version"`
	Routers    []RouterRevoke   `json:"routers"`
	AllClean   bool             `json:"all_clean"`
	// CleanAfter is from the Vault write to the last router clean (when
	// all are); Refresh the slowest router's refresh interval (seconds in
	// JSON, as every duration aoctl prints).
	CleanAfter control.Duration `json:"clean_after,omitempty"`
	Refresh    control.Duration `json:"refresh"`
}

func (a *app) fleetRevoke() *cmd {
	path := a.fleetPathFlag()
	var reason string
	wait := time.Duration(-1)
	fs := a.flagSet("fleet revoke", "CHAIN/KEY --reason TEXT [--path MOUNT/PREFIX] [--wait D]", func(w io.Writer) {
		fmt.Fprint(w, `
Records the revocation in the fleet's record in Vault (check-and-set, with
who: your token's display name and $USER, why: --reason, and when). Every
aokeyd reads the record at each refresh, takes the key off all its
sockets at once (as aoctl revoke does locally) and reports when it saw it
and when its sockets were clean in its status document. aoctl waits for
every reporting router (--wait, default two refresh intervals of the
slowest router plus 5s; 0: do not wait, exit 0 once recorded), printing
each router as it becomes clean, then the table of every router. Exit
status 1 unless every reporting router is clean in time. For one router,
use aoctl revoke.
`)
	})
	fs.StringVar(&path, "path", path, "fleet path in Vault: KV v2 mount and prefix ($AOKEYD_FLEET_PATH)")
	fs.StringVar(&reason, "reason", "", "why the key is revoked (required; recorded)")
	fs.Var(durationFlag{&wait}, "wait", "how long to wait for every router to be clean")
	return a.cmd(fs, func(ctx context.Context) int {
		chain, key, code, ok := a.keyArg("fleet revoke", fs)
		if !ok {
			return code
		}
		if strings.TrimSpace(reason) == "" {
			return a.usageErr("fleet revoke", "--reason is required: it is recorded with the revocation")
		}
		st, err := a.fleetStore(path)
		if err != nil {
			return a.fail("fleet revoke", err)
		}
		wctx, cancel := context.WithTimeout(ctx, a.timeout)
		r := fleet.Revocation{Chain: chain, Key: key, By: a.who(wctx, st), Reason: reason, At: a.now().UTC()}
		rep := RevokeReport{}
		rep.Revocation, rep.Version, err = st.AddRevocation(wctx, r)
		cancel()
		written := a.now()
		switch {
		case errors.Is(err, fleet.ErrAlreadyRevoked):
			rep.Already = true
			written = rep.Revocation.At
		case err != nil:
			return a.fail("fleet revoke", err)
		}
		if !rep.Already {
			// The record's own time is the write's.
			written = rep.Revocation.At
		}
		var onClean func(RouterRevoke)
		if !a.json {
			what := "recorded"
			if rep.Already {
				what = "already recorded"
			}
			fmt.Fprintf(a.stdout, "Fleet revoke %s: %s (version %d) by %s at %s: %s\n", rep.Revocation.Ref(), what, rep.Version,
				rep.Revocation.By, stamp(rep.Revocation.At), rep.Revocation.Reason)
			// Each router as it becomes clean, while the others are
			// waited for.
			onClean = func(x RouterRevoke) {
				fmt.Fprintf(a.stdout, "  %s clean at %s, %d ms after the write (sockets: %d)\n", x.Router, stamp(x.Clean),
					time.Duration(x.CleanAfter).Milliseconds(), x.Sockets)
			}
		}
		rep.AllClean = a.waitClean(ctx, st, &rep, written, wait, onClean)
		code = exitOK
		if !rep.AllClean && wait != 0 {
			// Asked to wait, and not every router is clean in time. With
			// --wait 0 the revoke is done once recorded.
			code = exitError
		}
		if a.json {
			return a.printJSONCode(rep, code)
		}
		t := newTable(a.stdout, "", "ROUTER", "SEEN", "CLEAN", "CLEAN_MS", "SOCKETS", "NOTE")
		for _, x := range rep.Routers {
			ms := "-"
			if !x.Clean.IsZero() {
				ms = fmt.Sprint(time.Duration(x.CleanAfter).Milliseconds())
			}
			t.row(x.Router, stamp(x.Seen), stamp(x.Clean), ms, fmt.Sprint(x.Sockets), dash(x.Note))
		}
		t.flush()
		if rep.AllClean {
			fmt.Fprintf(a.stdout, "every reporting router is clean: %d routers, last %d ms after the write\n", len(rep.Routers), time.Duration(rep.CleanAfter).Milliseconds())
		} else if wait == 0 {
			fmt.Fprintf(a.stdout, "not waited for (--wait 0): aoctl fleet status shows each router's progress\n")
		} else {
			fmt.Fprintf(a.stdout, "NOT every reporting router is clean yet\n")
		}
		return code
	})
}

// waitClean polls the routers' documents until each reporting router
// shows r applied and clean, or wait runs out; it fills rep.Routers, and
// calls onClean (when set) once for each router as it is first seen clean.
func (a *app) waitClean(ctx context.Context, st fleet.Store, rep *RevokeReport, written time.Time, wait time.Duration, onClean func(RouterRevoke)) bool {
	start := a.now()
	r := rep.Revocation
	told := map[string]bool{}
	for {
		qctx, cancel := context.WithTimeout(ctx, a.timeout)
		docs, _, err := st.Statuses(qctx)
		cancel()
		if err != nil {
			fmt.Fprintf(a.stderr, "aoctl fleet revoke: reading the routers' documents: %v\n", err)
		}
		var refresh time.Duration
		all := len(docs) > 0
		rep.Routers, rep.CleanAfter = nil, 0
		for _, d := range docs {
			refresh = max(refresh, time.Duration(d.Refresh))
			x := RouterRevoke{Router: d.RouterID}
			i := slices.IndexFunc(d.Revocations, func(ap fleet.Applied) bool {
				return ap.Chain == r.Chain && ap.Key == r.Key && ap.At.Equal(r.At)
			})
			if i >= 0 {
				ap := d.Revocations[i]
				x.Seen, x.Clean, x.Sockets, x.Note = ap.Seen, ap.Clean, ap.Sockets, ap.Error
				if ap.NotInSource {
					x.Note = "key not in this router's source"
				}
				if !ap.Clean.IsZero() {
					x.CleanAfter = control.Duration(max(ap.Clean.Sub(written), 0))
					rep.CleanAfter = max(rep.CleanAfter, x.CleanAfter)
				}
			}
			if x.Clean.IsZero() {
				all = false
				if x.Note == "" {
					x.Note = "not seen yet"
				}
			} else if !told[x.Router] && onClean != nil {
				told[x.Router] = true
				onClean(x)
			}
			rep.Routers = append(rep.Routers, x)
		}
		rep.Refresh = control.Duration(refresh)
		limit := wait
		if limit < 0 {
			limit = 2*refresh + 5*time.Second
		}
		if all || a.now().Sub(start) >= limit || ctx.Err() != nil {
			if !all {
				rep.CleanAfter = 0
			}
			return all
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
