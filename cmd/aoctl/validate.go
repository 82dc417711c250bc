package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// validateResult is validate's outcome; --json prints it. Each problem
// and warning is an object (file, line, column, field, problem, hint),
// printed as text in the one shape FILE:LINE:COL: FIELD: PROBLEM; HINT.
type validateResult struct {
	Config   string            `json:"config"`
	OK       bool              `json:"ok"`
	Problems []keystore.Report `json:"problems"`
	// Warnings are what passes but must be heard of; they leave OK true.
	Warnings []keystore.Report `json:"warnings"`
}

func (a *app) validate() *cmd {
	var offline, noKernel bool
	var at string
	var horizon string
	fs := a.flagSet("validate", "CONFIG [--at TIME] [--horizon DURATION] [--no-keys]", func(w io.Writer) {
		fmt.Fprint(w, `
Runs the daemon's start-up checks: the config (strict YAML), the control
group, the policy, the key source (reads the key file or Vault), and the
policy against the keys over the horizon (unknown chains or keys, ID
clashes, gaps in send-key coverage). Prints one problem per line, in one
shape whichever file it is in (the config, the policy, the key file, a
Vault chain): FILE:LINE:COL: FIELD: PROBLEM, and after a "; " what to do
when the problem does not say it; FIELD is the YAML path in FILE, and
parts that are unknown are left out. --json gives each problem as an
object: file, line, column, field, problem, hint (0 and "" when
unknown). No value of the config is shown, nor a key source's, nor a
policy's that could be key material: a secret pasted on the wrong line
is named by its place. On Linux it also asks this machine's kernel
whether it has TCP-AO (CONFIG_TCP_AO), as aokeyd does at start: it refuses
to start without TCP-AO, and when the kernel cannot be asked (a seccomp
filter or an LSM denying the probe); and which TCP-AO algorithms the kernel
accepts (one scratch key each): a key of one it refuses is a problem.
It warns, and still passes, of what would never work as meant: a policy
binding whose vrf: names no VRF device on this machine, and keys whose
material is one of the public demo keys aokeyd init writes (found by their
secret, whatever their name). --timeout bounds the key source's read
(Vault included). --no-kernel skips the kernel checks and the VRF devices
when validating for another machine. Warnings are printed as WARNING:
lines and leave the exit status 0. Exit status 4 when there is any
problem.
`)
	})
	fs.BoolVar(&offline, "no-keys", false, "skip the key source (config and policy only)")
	fs.BoolVar(&noKernel, "no-kernel", false, "skip the checks of this machine: its kernel's TCP-AO, its VRF devices")
	fs.StringVar(&at, "at", "", "validate as of this time (RFC 3339 or date; default now)")
	fs.StringVar(&horizon, "horizon", "90d", "look this far ahead for gaps")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 1 {
			return a.usageErr("validate", "name one CONFIG file")
		}
		now, err := a.instant(at)
		if err != nil {
			return a.usageErr("validate", "--at: %v", err)
		}
		h, err := policy.ParseDuration(horizon)
		if err != nil || h <= 0 {
			return a.usageErr("validate", "--horizon %q: want a positive duration like 90d", horizon)
		}
		o := config.CheckOptions{Now: now, Horizon: h, SkipKeySource: offline, ReadTimeout: a.timeout}
		if o.VRFDevice = a.vrfDevice; o.VRFDevice == nil {
			o.VRFDevice = config.LocalVRF
		}
		// The kernel is asked first: the keys' algorithms are checked
		// against it (by Check, as aokeyd's start does) only when it
		// could be asked at all.
		var kernelErr error
		if noKernel {
			o.VRFDevice = nil
		} else if kernelErr = a.kernelCheck(); kernelErr == nil {
			o.Algorithms = a.algorithms
		}
		ch := config.Check(ctx, fs.Arg(0), o)
		defer ch.Snapshot.Zero()
		res := validateResult{Config: fs.Arg(0), OK: ch.OK(), Problems: []keystore.Report{}, Warnings: []keystore.Report{}}
		for _, p := range ch.Problems {
			r := keystore.ReportOf(p)
			if errors.Is(p, config.ErrReadTimeout) && r.Hint == "" {
				r.Hint = "raise aoctl's --timeout, or make the key source answer"
			}
			res.Problems = append(res.Problems, r)
		}
		for _, w := range ch.Warnings {
			res.Warnings = append(res.Warnings, keystore.ReportOf(w))
		}
		if kernelErr != nil {
			res.Problems = append(res.Problems, keystore.ReportOf(kernelErr))
			res.OK = false
		}
		if a.json {
			if c := a.printJSON(res); c != exitOK {
				return c
			}
		} else {
			for _, p := range res.Problems {
				fmt.Fprintln(a.stdout, p)
			}
			for _, w := range res.Warnings {
				fmt.Fprintln(a.stdout, "WARNING: "+w.String())
			}
			if res.OK {
				fmt.Fprintf(a.stdout, "%s: ok (policy %s", res.Config, ch.Config.Policy.Path)
				if ch.Snapshot != nil {
					fmt.Fprintf(a.stdout, ", %d key chains", len(ch.Snapshot.Chains))
				}
				fmt.Fprintln(a.stdout, ")")
			} else {
				noun := "problems"
				if len(res.Problems) == 1 {
					noun = "problem"
				}
				fmt.Fprintf(a.stderr, "%s: %d %s\n", res.Config, len(res.Problems), noun)
			}
		}
		if !res.OK {
			return exitInvalid
		}
		return exitOK
	})
}

// instant parses --at, or returns the clock's now.
func (a *app) instant(s string) (time.Time, error) {
	if s == "" {
		return a.now(), nil
	}
	return policy.ParseTime(s)
}
