package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/hashicorp/vault/api"
)

// Exit codes.
const (
	exitOK          = 0 // success
	exitError       = 1 // the operation failed (daemon error, a socket failed, not found)
	exitUsage       = 2 // bad command line
	exitUnreachable = 3 // the daemon's control socket cannot be reached
	exitInvalid     = 4 // validation found problems
	exitRefused     = 5 // the daemon refused this uid: not in control.group (read) or control.admin_group (rotate, revoke)
)

// app is one invocation: its output streams, clock and global flags. There
// is no package-level state.
type app struct {
	stdout, stderr io.Writer
	now            func() time.Time
	getenv         func(string) string
	// probe asks the local kernel for TCP-AO (tcpao.Probe); nil skips it.
	probe func() error
	// algorithms asks the local kernel which TCP-AO algorithms it accepts
	// (tcpao.ProbeAlgorithms) and names it; nil skips the check.
	algorithms func() (map[tcpao.Algorithm]error, string)
	// vrfDevice says whether a name is a VRF device on this machine
	// (config.LocalVRF, the default when nil).
	vrfDevice func(string) error

	socket  string
	json    bool
	timeout time.Duration

	// vault is the operator's Vault client for `aoctl fleet`; nil builds
	// one from the environment (VAULT_ADDR, VAULT_TOKEN, ...).
	vault func() (*api.Client, error)

	// api is what rotate --wait and status --watch ask the daemon; nil:
	// the control socket's client (tests follow rolls on a fake clock).
	api daemonAPI

	// timeoutSet: --timeout was given (rotate --wait bounds its wait by
	// it then, by its own default otherwise).
	timeoutSet bool

	// code is the exit code of the command that ran.
	code int
}

// command is one line of aoctl's command table: its name, synopsis and
// summary (the usage text and the man pages), and either build (a leaf) or
// subs (fleet's status and revoke).
type command struct {
	name, args, summary string
	build               func(a *app) *cmd
	subs                []command
}

func commands() []command {
	return []command{
		{"status", "[PEER]", "TCP-AO state of every peer (or one): sockets, keys, counters, rotation, warnings", (*app).status, nil},
		{"plan", "[--config FILE]", "what the controller would do now and at the next scheduled changes (dry run)", (*app).plan, nil},
		{"rotate", "PEER | --all", "start a key rotation now", (*app).rotate, nil},
		{"revoke", "CHAIN/KEY [--peer PEER]", "emergency revoke: remove a key from every socket (or one peer's) at once", (*app).revoke, nil},
		{"replace", "CHAIN/KEY", "apply a key's material edited in place (held back until then); resets sessions that need it", (*app).replace, nil},
		{"adopt", "PEER [--vrf VRF]", "hand keys another agent installed for a peer (kept, never changed) to aokeyd", (*app).adopt, nil},
		{"migrate", "PEER|--all [--at TIME]", "move TCP-MD5 peers to TCP-AO, one reconnect each, with roll-back", (*app).migrate, nil},
		{"fleet", "status|revoke CHAIN/KEY", "the fleet through Vault: every link from both ends; revoke a key fleet-wide", nil, []command{
			{"status", "", "every link of the fleet from both ends, flagged where the ends disagree", (*app).fleetStatus, nil},
			{"revoke", "CHAIN/KEY --reason TEXT", "revoke a key on every router through the fleet record, and wait until all are clean", (*app).fleetRevoke, nil},
		}},
		{"validate", "CONFIG", "check a config, its policy and keys as the daemon does", (*app).validate, nil},
		{"peer-config", "PEER --for TARGET", "the far end's TCP-AO config for PEER's chain (bird, junos, iosxr, eos, gobgp, aokeyd, yang)", (*app).peerConfig, nil},
		{"version", "", "aoctl's version, and the daemon's when it answers", (*app).versionCmd, nil},
	}
}

const usageExamples = `
Examples:
  aoctl status                         every peer, as a table
  aoctl status 192.0.2.2 --json        one peer, for scripts
  aoctl plan                           the daemon's dry run against the kernel state
  aoctl plan --config /etc/aokeyd/aokeyd.yaml --at 2026-11-01
                                       offline plan from the config files
  aoctl rotate 192.0.2.2               roll one peer to its newest key now
  aoctl rotate --all
  aoctl revoke core/2026-10            remove a compromised key everywhere
  aoctl replace core/2026-10           apply core/2026-10's new secret, edited in place in the key source
  aoctl adopt 192.0.2.2                make the keys another agent installed for the peer aokeyd's
  aoctl validate /etc/aokeyd/aokeyd.yaml && systemctl reload aokeyd
  aoctl peer-config 192.0.2.2 --for junos --local 192.0.2.1
                                       the far end's key chain, secrets as placeholders
  aoctl fleet status                   every link of the fleet from both ends (Vault, $VAULT_TOKEN)
  aoctl fleet revoke core/2026-10 --reason "leaked in ticket 4711"
                                       revoke a key on every router, and wait until all are clean
  aoctl version                        aoctl's version and the running daemon's

Global flags (before or after the command):
  --socket PATH   control socket (default $AOKEYD_SOCKET or ` + control.DefaultSocket + `)
  --json          machine-readable output
  --timeout D     per-request timeout (default 30s)

Exit codes:
  0 ok   1 operation failed   2 usage   3 daemon unreachable   4 validation failed   5 permission denied
  (5: status and plan need control.group, rotate, revoke, replace and adopt control.admin_group, or root)
`

func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: aoctl [--socket PATH] [--json] COMMAND [ARGS]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %-24s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, usageExamples)
}

func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.socket, "socket", a.socket, "control socket path")
	fs.BoolVar(&a.json, "json", a.json, "JSON output")
	fs.DurationVar(&a.timeout, "timeout", a.timeout, "per-request timeout")
}

// flagSet returns a FlagSet for a command with the global flags and a
// usage text built from the command's synopsis.
func (a *app) flagSet(name, synopsis string, extra func(io.Writer)) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	fs.Usage = func() {
		w := fs.Output()
		if name == "aoctl" {
			a.usage(w)
			return
		}
		fmt.Fprintf(w, "Usage: aoctl %s %s\n\nFlags:\n", name, synopsis)
		printFlags(w, fs)
		if extra != nil {
			extra(w)
		}
	}
	return fs
}

func (a *app) usageErr(name, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "aoctl %s: %s\nRun 'aoctl %s --help' for usage.\n", name, fmt.Sprintf(format, args...), name)
	return exitUsage
}

func (a *app) client() *control.Client { return control.NewClient(a.socket, a.timeout) }

// daemonAPI is the part of the control API that rotate --wait and status
// --watch use (control.Client's methods).
type daemonAPI interface {
	Status(ctx context.Context, peer string) (control.StatusReport, error)
	Rotate(ctx context.Context, req control.RotateRequest) (control.RotateResult, error)
	Rolls(ctx context.Context, req control.RollsRequest) (control.RollsReport, error)
}

// daemon is a.api, or the control socket's client.
func (a *app) daemon() daemonAPI {
	if a.api != nil {
		return a.api
	}
	return a.client()
}

// fail prints err and maps it to an exit code.
func (a *app) fail(name string, err error) int {
	fmt.Fprintf(a.stderr, "aoctl %s: %v\n", name, err)
	switch {
	case errors.Is(err, control.ErrUnreachable):
		fmt.Fprintf(a.stderr, "(is aokeyd running? the socket is set with --socket or $AOKEYD_SOCKET)\n")
		// aokeyd exits at start on a kernel without TCP-AO: say why here.
		if err := a.kernelProblem(); err != nil {
			fmt.Fprintf(a.stderr, "aoctl %s: %v\n", name, err)
		}
		return exitUnreachable
	case errors.Is(err, control.ErrRefused):
		return exitRefused
	}
	return exitError
}

// kernelProblem is the local kernel probe's answer when it says the kernel
// lacks TCP-AO, and nil otherwise (no probe, TCP-AO present, not Linux, or
// the kernel could not be asked: aoctl's confinement is not aokeyd's, so a
// denied probe here says nothing about why the daemon is not running).
func (a *app) kernelProblem() error {
	if err := a.kernelCheck(); errors.Is(err, tcpao.ErrNoKernelSupport) {
		return err
	}
	return nil
}

// kernelCheck is validate's kernel check: any probe error, as aokeyd
// refuses to start on any (a kernel without TCP-AO, or one that could not
// be asked); nil without a probe.
func (a *app) kernelCheck() error {
	if a.probe == nil {
		return nil
	}
	return a.probe()
}

func (a *app) printJSON(v any) int {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<secret: ...>", "->" as written: this is no HTML
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(a.stderr, "aoctl: %v\n", err)
		return exitError
	}
	return exitOK
}

// printJSONCode prints v as printJSON does and returns code, or
// printJSON's failure.
func (a *app) printJSONCode(v any, code int) int {
	if c := a.printJSON(v); c != exitOK {
		return c
	}
	return code
}
