package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// aoctl's command line is a cobra command tree (dispatch, help, shell
// completion and man pages from one description), while each command keeps
// its flags in a standard library FlagSet: cobra parses them (through
// pflag's AddGoFlagSet, so each value's own Set runs and its errors read
// as before) and the FlagSet prints the command's help text. The command
// line that Go's flag package accepted is still accepted and answered the
// same way, exit codes included: testdata/cli.golden pins it.

// defaultTimeout is --timeout's default.
const defaultTimeout = 30 * time.Second

// cmd is one leaf command: its flags (the global ones among them, for its
// help text) and what it does once the command line is parsed; run reads
// its positional arguments from fs.Args().
type cmd struct {
	fs  *flag.FlagSet
	run func(ctx context.Context) int
}

func (a *app) cmd(fs *flag.FlagSet, run func(ctx context.Context) int) *cmd {
	return &cmd{fs: fs, run: run}
}

func (a *app) run(ctx context.Context, args []string) int {
	a.socket = a.getenv("AOKEYD_SOCKET")
	if a.socket == "" {
		a.socket = control.DefaultSocket
	}
	a.timeout = defaultTimeout
	a.code = exitOK
	root := a.rootCommand()
	root.SetArgs(longFlags(args, valueFlags(root)))
	if err := root.ExecuteContext(ctx); err != nil {
		var fe *flagError
		if errors.As(err, &fe) {
			name := strings.TrimPrefix(strings.TrimPrefix(fe.cmd.CommandPath(), "aoctl"), " ")
			fmt.Fprintf(a.stderr, "aoctl: %v\n", goFlagError(fe.err))
			fmt.Fprintf(a.stderr, "Run 'aoctl %s --help' for usage.\n", name)
			return exitUsage
		}
		fmt.Fprintf(a.stderr, "aoctl: %v\n", err)
		return exitUsage
	}
	return a.code
}

// rootCommand is aoctl's command tree for one invocation (flag values are
// bound to this app and to each command's locals).
func (a *app) rootCommand() *cobra.Command {
	global := flag.NewFlagSet("aoctl", flag.ContinueOnError)
	a.globalFlags(global)
	var usage bytes.Buffer
	a.usage(&usage)
	root := &cobra.Command{
		Use:   "aoctl",
		Short: "operate aokeyd, the TCP-AO key rotation manager for BGP",
		Long: "aoctl operates aokeyd, the TCP-AO (RFC 5925) key rotation manager for BGP, through its " +
			"control socket: status, dry-run plans, rotations, emergency revokes, TCP-MD5 migrations; " +
			"it validates configs and renders the far end's configuration offline, and with a Vault " +
			"token shows and revokes across the fleet.\n\n" + usage.String(),
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(a.stderr, "aoctl: unknown command %q\n\n", args[0])
			}
			a.usage(a.stderr)
			a.code = exitUsage
			return nil
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.PersistentFlags().AddGoFlagSet(global)
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c == root {
			a.usage(a.stdout)
			return
		}
		cobraHelp(c, args) // cobra's own commands: completion, help
	})
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &flagError{cmd: c, err: err} })
	for _, c := range commands() {
		root.AddCommand(a.cobraCommand(c))
	}
	root.AddCommand(a.manCommand())
	return root
}

// cobraCommand is one line of the command table as a cobra command.
func (a *app) cobraCommand(c command) *cobra.Command {
	cc := &cobra.Command{
		Use:   strings.TrimSpace(c.name + " " + c.args),
		Short: c.summary,
		Args:  cobra.ArbitraryArgs,
	}
	if c.build == nil { // fleet
		cc.Long = c.summary
		// Its arguments are a subcommand's name, as before cobra: an
		// unknown one is named as such even when it looks like a flag.
		cc.DisableFlagParsing = true
		cc.RunE = func(_ *cobra.Command, args []string) error {
			a.code = a.fleetArgs(args)
			return nil
		}
		cc.SetHelpFunc(func(*cobra.Command, []string) { a.fleetHelp(a.stdout) })
		for _, s := range c.subs {
			cc.AddCommand(a.cobraCommand(s))
		}
		return cc
	}
	x := c.build(a)
	cc.Long = c.summary
	if h := helpText(x.fs); h != "" {
		cc.Long = h
	}
	cc.Flags().AddGoFlagSet(x.fs)
	cc.RunE = func(cc *cobra.Command, args []string) error {
		// The positional arguments, where run reads them.
		_ = x.fs.Parse(append([]string{"--"}, args...))
		a.timeoutSet = cc.Flags().Changed("timeout")
		a.code = x.run(cc.Context())
		return nil
	}
	cc.SetHelpFunc(func(*cobra.Command, []string) {
		x.fs.SetOutput(a.stdout)
		x.fs.Usage()
	})
	return cc
}

// helpText is the explanation fs's usage prints after its flags (the man
// page's description).
func helpText(fs *flag.FlagSet) string {
	var all, defaults bytes.Buffer
	fs.SetOutput(&all)
	fs.Usage()
	printFlags(&defaults, fs)
	_, after, _ := strings.Cut(all.String(), defaults.String())
	return strings.TrimSpace(after)
}

// flagError is a command line cobra could not parse for cmd.
type flagError struct {
	cmd *cobra.Command
	err error
}

func (e *flagError) Error() string { return e.err.Error() }

// goFlagError words a pflag parse error as Go's flag package did, which
// scripts read, with the flag spelled --name as every help text spells it.
func goFlagError(err error) error {
	var notExist *pflag.NotExistError
	var required *pflag.ValueRequiredError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &notExist):
		return fmt.Errorf("flag provided but not defined: --%s", notExist.GetSpecifiedName())
	case errors.As(err, &required):
		return fmt.Errorf("flag needs an argument: --%s", required.GetSpecifiedName())
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		if f.Value.Type() == "bool" {
			return fmt.Errorf("invalid boolean value %q for --%s: %v", invalid.GetValue(), f.Name, errors.Unwrap(invalid))
		}
		return fmt.Errorf("invalid value %q for flag --%s: %v", invalid.GetValue(), f.Name, errors.Unwrap(invalid))
	}
	return err
}

// valueFlags are the names of every flag in the tree that takes a value.
func valueFlags(root *cobra.Command) map[string]bool {
	m := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.NoOptDefVal == "" {
					m[f.Name] = true
				}
			})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return m
}

// longFlags spells -name and -name=value as --name: Go's flag package took
// one dash or two, pflag reads "-json" as the shorthands j, s, o and n. The
// argument after a flag that takes a value is that value, whatever its
// first character; nothing after "--" is a flag.
func longFlags(args []string, takesValue map[string]bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		s := args[i]
		if s == "--" {
			return append(out, args[i:]...)
		}
		if len(s) > 2 && s[0] == '-' && s[1] != '-' {
			s = "-" + s
		}
		out = append(out, s)
		if name, ok := strings.CutPrefix(s, "--"); ok && !strings.Contains(name, "=") && takesValue[name] && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
