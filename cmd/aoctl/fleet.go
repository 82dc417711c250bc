package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/hashicorp/vault/api"
)

// defaultFleetPath is the fleet path when neither --path nor
// $AOKEYD_FLEET_PATH names one (aokeyd.yaml fleet.vault_path).
const defaultFleetPath = "secret/aokeyd/fleet"

// fleetHelp is `aoctl fleet --help`.
func (a *app) fleetHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: aoctl fleet status [--path MOUNT/PREFIX] [--horizon D] [--stale D] [--roll-window D] [--json]
       aoctl fleet revoke CHAIN/KEY --reason TEXT [--path MOUNT/PREFIX] [--wait D] [--json]

The fleet view through Vault, with your own token (VAULT_ADDR, VAULT_TOKEN):
every aokeyd with a fleet: section publishes its status under the fleet
path (default $AOKEYD_FLEET_PATH or `+defaultFleetPath+`). 'aoctl fleet status --help' and
'aoctl fleet revoke --help' say more.
`)
}

// fleetArgs is `aoctl fleet` without a known subcommand.
func (a *app) fleetArgs(args []string) int {
	if len(args) == 0 {
		return a.usageErr("fleet", "name a subcommand: status or revoke")
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		a.fleetHelp(a.stdout)
		return exitOK
	}
	return a.usageErr("fleet", "unknown subcommand %q: want status or revoke", args[0])
}

// fleetStore is the fleet path in Vault with the operator's own token.
func (a *app) fleetStore(path string) (fleet.Store, error) {
	mount, prefix, err := fleet.ParsePath(path)
	if err != nil {
		return fleet.Store{}, err
	}
	mk := a.vault
	if mk == nil {
		mk = func() (*api.Client, error) {
			cfg := api.DefaultConfig()
			if cfg.Error != nil {
				return nil, cfg.Error
			}
			cfg.Timeout = a.timeout
			return api.NewClient(cfg)
		}
	}
	c, err := mk()
	if err != nil {
		return fleet.Store{}, fmt.Errorf("vault client: %w", err)
	}
	if c.Token() == "" {
		return fleet.Store{}, errors.New("no Vault token: set VAULT_TOKEN (your own token; aoctl never uses aokeyd's)")
	}
	return fleet.Store{V: fleet.Client{C: c}, Mount: mount, Prefix: prefix}, nil
}

func (a *app) fleetPathFlag() string {
	if p := a.getenv("AOKEYD_FLEET_PATH"); p != "" {
		return p
	}
	return defaultFleetPath
}

// durationFlag reads the policy's durations ("30s", "7d").
type durationFlag struct{ d *time.Duration }

// String is the duration; "" for none set (0, or wait's -1: "the
// default", which the flag's usage says).
func (f durationFlag) String() string {
	if f.d == nil || *f.d <= 0 {
		return ""
	}
	return policy.FormatDuration(*f.d)
}

// Type names the value in help texts.
func (durationFlag) Type() string { return "duration" }

func (f durationFlag) Set(s string) error {
	v, err := policy.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = v
	return nil
}

func (a *app) fleetStatus() *cmd {
	path := a.fleetPathFlag()
	o := fleet.JoinOptions{Horizon: 7 * 24 * time.Hour}
	fs := a.flagSet("fleet status", "[--path MOUNT/PREFIX] [--horizon D] [--stale D] [--roll-window D]", func(w io.Writer) {
		fmt.Fprint(w, `
Reads every router's status document from Vault (with your own token:
VAULT_ADDR, VAULT_TOKEN) and shows each BGP session as a link from both
ends, flagging: ends sending with different keys for longer than a roll
takes (current-differs); a key one end announces that the other does not
hold (announced-not-held); a key whose IDs are not mirrored
(ids-not-mirrored) or whose include-TCP-options setting differs
(tcp-options-differ); a current key expiring within the horizon with no
successor (expiring-no-successor); a router that stopped reporting
(stale); a far end that publishes nothing, such as a BIRD router
(far-end-not-reporting). Exit status 1 when any link is flagged.
`)
	})
	fs.StringVar(&path, "path", path, "fleet path in Vault: KV v2 mount and prefix ($AOKEYD_FLEET_PATH)")
	fs.Var(durationFlag{&o.Horizon}, "horizon", "a current key ending within this needs a successor")
	fs.Var(durationFlag{&o.StaleAfter}, "stale", "a document older than this is stale (default: 3 refresh intervals of its router)")
	fs.Var(durationFlag{&o.RollWindow}, "roll-window", "how long ends may send with different keys (default: switch timeout + refreshes)")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 0 {
			return a.usageErr("fleet status", "no arguments expected")
		}
		st, err := a.fleetStore(path)
		if err != nil {
			return a.fail("fleet status", err)
		}
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		docs, errs, err := st.Statuses(ctx)
		if err != nil {
			return a.fail("fleet status", err)
		}
		o.Now = a.now()
		links := fleet.Join(docs, o)
		code := exitOK
		for _, l := range links {
			if len(l.Flags) > 0 {
				code = exitError
			}
		}
		for _, e := range errs {
			fmt.Fprintf(a.stderr, "aoctl fleet status: %v\n", e)
			code = exitError
		}
		if a.json {
			rep := fleetReport{GeneratedAt: o.Now, Path: st.Where(), Routers: len(docs), Links: links}
			if rep.Links == nil {
				rep.Links = []fleet.Link{}
			}
			return a.printJSONCode(rep, code)
		}
		renderFleet(a.stdout, st.Where(), docs, links, o.Now)
		return code
	})
}

// fleetReport is `aoctl fleet status --json`.
type fleetReport struct {
	GeneratedAt time.Time    `json:"generated_at"`
	Path        string       `json:"path"`
	Routers     int          `json:"routers"`
	Links       []fleet.Link `json:"links"`
}

func renderFleet(w io.Writer, where string, docs []fleet.Document, links []fleet.Link, now time.Time) {
	flagged := 0
	for _, l := range links {
		if len(l.Flags) > 0 {
			flagged++
		}
	}
	fmt.Fprintf(w, "Fleet %s: %d routers reporting, %d links, %d flagged\n", where, len(docs), len(links), flagged)
	for _, l := range links {
		fmt.Fprintf(w, "\n%s\n", l.Name())
		t := newTable(w, "  ", "END", "PEER", "SESSION", "AUTH", "CURRENT", "RNEXT", "KEYS", "ROLL", "PKT_BAD", "KEY_NOT_FOUND", "REPORTED")
		ends := []fleet.End{l.A}
		if l.B != nil {
			ends = append(ends, *l.B)
		}
		for _, e := range ends {
			p := e.Peer
			var keys []string
			for _, k := range p.Keys {
				opt := ""
				if !k.IncludeTCPOptions {
					opt = ",no-opts"
				}
				keys = append(keys, fmt.Sprintf("%s(%d/%d%s)", k.Ref(), k.SendID, k.RecvID, opt))
			}
			t.row(e.Router, p.ID.Shown(p.Neighbor), p.Session, dash(p.Auth), dash(p.Current), dash(p.RNext), dash(strings.Join(keys, " ")),
				dash(p.Roll.State), fmt.Sprint(p.Counters.PktBad), fmt.Sprint(p.Counters.PktKeyNotFound),
				human(now.Sub(e.PublishedAt))+" ago")
		}
		if l.B == nil {
			t.row("-", "-", "(far end not reporting)", "", "", "", "", "", "", "", "")
		}
		t.flush()
		for _, f := range l.Flags {
			who := ""
			if f.Router != "" {
				who = " at " + f.Router
			}
			key := ""
			if f.Key != "" {
				key = " " + f.Key
			}
			fmt.Fprintf(w, "  FLAG %s%s%s: %s\n", f.Kind, key, who, f.Detail)
		}
	}
}
