package main

import (
	"flag"
	"path/filepath"
	"time"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/rotator"
)

// The daemon's and its subcommands' flags, in one place for parsing and
// for the man page (man.go).

// daemonOptions are aokeyd's own flags.
type daemonOptions struct {
	config, stateDir, guard string
	roll                    rotator.Config
	resync                  time.Duration
	version                 bool
}

func daemonFlags() (*flag.FlagSet, *daemonOptions) {
	o := &daemonOptions{}
	fs := flag.NewFlagSet("aokeyd", flag.ContinueOnError)
	fs.StringVar(&o.config, "config", config.DefaultPath, "configuration file")
	fs.StringVar(&o.stateDir, "state-dir", "/var/lib/aokeyd", "directory for the revocation and ownership records")
	fs.StringVar(&o.guard, "connectguard", "", "socket `PATH` of an aokeyd exec launcher: key the speaker's outgoing connects (active opens) and its listeners before they listen")
	fs.DurationVar(&o.roll.Grace, "roll-grace", 0, "minimum time between switching to a new key and deleting the old one (default 1m; labs use seconds)")
	fs.DurationVar(&o.roll.Poll, "roll-poll", 0, "how often counters are read during a roll (default 1s)")
	fs.DurationVar(&o.roll.Backoff, "roll-backoff", 0, "first retry delay after an aborted roll (default 1m)")
	fs.DurationVar(&o.roll.Steady, "steady-poll", 0, "how often a steady session's keys are re-read and drift put back (default 30s)")
	fs.DurationVar(&o.resync, "resync", 0, "longest time between two full passes, which re-read the listening sockets' keys (default 30s)")
	fs.BoolVar(&o.version, "version", false, "print aokeyd's version and exit (as aokeyd version)")
	return fs, o
}

// initOptions are aokeyd init's flags.
type initOptions struct {
	dir   string
	force bool
}

func initFlags() (*flag.FlagSet, *initOptions) {
	o := &initOptions{}
	fs := flag.NewFlagSet("aokeyd init", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", filepath.Dir(config.DefaultPath), "where to write aokeyd.yaml, policy.yaml and keys.yaml (none of them may exist there)")
	fs.BoolVar(&o.force, "force", false, "move each of those files that exists aside to FILE.bak (FILE.bak.N when taken) before writing")
	return fs, o
}

func execFlags() (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("aokeyd exec", flag.ContinueOnError)
	sock := fs.String("socket", "/run/aokeyd/connectguard.sock", "where aokeyd -connectguard fetches the listener")
	return fs, sock
}
