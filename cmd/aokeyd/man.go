package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/manpage"
	"github.com/aokeyd/aokeyd/internal/refdoc"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// aokeyd parses its command line with the standard library's flag package
// (one daemon, three subcommands); its man pages are generated from the
// same FlagSets through a cobra tree built only for them, as aoctl's are.

const daemonLong = `aokeyd reads Master Key Tuples (MKTs) from HashiCorp Vault (KV v2) or a
YAML file, puts them on the BGP speaker's listening and established sockets
(TCP_AO_ADD_KEY and friends; gobgpd and FRR's bgpd through their sockets,
BIRD through its own configuration), rolls them by the policy without
dropping a session (Current_key and RNext_key per peer, the old key kept
until the peer has moved), revokes a key everywhere within a second when
told, and serves aoctl(8) on a unix socket.

Stopping aokeyd leaves every installed key in place: sessions are not
affected by a restart. aokeyd changes only keys it installed.

SIGNALS: SIGHUP (systemctl reload aokeyd) checks the configuration, the
policy and the keys again, as at start, and applies the policy and log
level; a reload with a problem aoctl validate refuses is refused (each
problem logged, a status warning until a reload passes) and the running
configuration kept, and the keys are read either way (a key now rejected
keeps its last good version); check first with aoctl validate. Every
other setting that changed takes effect on restart, and is named in a
log line and a status warning until then. SIGTERM and
SIGINT stop the daemon. With systemd it reports readiness through
$NOTIFY_SOCKET (Type=notify).

FILES: /etc/aokeyd/aokeyd.yaml (the configuration, aokeyd.yaml(5)),
/etc/aokeyd/policy.yaml (key chains and peers, aokeyd-policy.yaml(5)), the
key file it names (aokeyd-keys.yaml(5)), /var/lib/aokeyd (the revocation
and ownership records: keep them across upgrades), /run/aokeyd/control.sock
(aoctl's socket).

The kernel needs CONFIG_TCP_AO (Linux 6.7 or later); aokeyd refuses to start
without it and says so. It refuses to start, too, on every problem aoctl
validate refuses, of the configuration, the policy or the keys, in the
same words, before it writes anything (exit status 1, before READY=1); a
Vault key source that gives no answer at boot is waited for instead.`

func manTree() *cobra.Command {
	dfs, _ := daemonFlags()
	root := &cobra.Command{
		Use:   "aokeyd",
		Short: "TCP-AO (RFC 5925) key rotation daemon for BGP routers",
		Long:  daemonLong,
		Run:   func(*cobra.Command, []string) {},
	}
	root.Flags().AddGoFlagSet(dfs)
	ifs, _ := initFlags()
	ini := &cobra.Command{
		Use:   "init [-dir DIR] [-force]",
		Short: "write the first-run configuration, policy and demo keys",
		Long: `Writes aokeyd.yaml, policy.yaml and keys.yaml into the directory (the
package ships the first two as /etc/aokeyd's defaults). keys.yaml holds
public demo keys: replace them, or point key_source at Vault, before
production.

It never overwrites: when any of the three files exists (an edited
configuration, the package's own), it names each one and writes nothing
(exit status 1). Edit them, move them aside, or pass -force, which first
moves each existing file to FILE.bak (FILE.bak.1, ... when that is taken,
with its mode kept).`,
		Run: func(*cobra.Command, []string) {},
	}
	ini.Flags().AddGoFlagSet(ifs)
	efs, _ := execFlags()
	exe := &cobra.Command{
		Use:   "exec [--socket PATH] -- PROGRAM [ARGS]",
		Short: "run a BGP daemon so that its connects and listeners carry TCP-AO keys",
		Long: `Starts PROGRAM (gobgpd, or watchfrr's bgpd) under a seccomp filter that
hands each connect() and listen() to aokeyd (run with --connectguard PATH).
For a connect to the BGP port aokeyd puts the peer's keys on the
connecting socket before the SYN leaves. For a listen on a socket bound to
the BGP port it puts every listener's keys (and TCP-MD5 passwords) on the
socket before it listens, so the listener never takes a peer's unsigned
SYN; before aokeyd has read its keys the listen waits. A connect or listen
that cannot be keyed fails with EKEYREJECTED ("Key was rejected by
service" in the program's log; aokeyd logs why). Every connect and listen
waits while no aokeyd serves PATH: start aokeyd first. It stays as a small
parent that keeps the filter's listener across aokeyd restarts and exits
with the program's status. Usable as a systemd unit's ExecStart=.

PROGRAM gets aokeyd's environment. A program whose go.mod says go 1.24 or
later (gobgpd v4) listens with Multipath TCP by default on kernels with
CONFIG_MPTCP, and TCP-AO cannot be set on such a listener: its listen on
the BGP port is refused, and Go listens with plain TCP instead. Give it
GODEBUG=multipathtcp=0 all the same (the example unit gobgpd-aokeyd.service
does): without aokeyd exec nothing else makes that fallback.`,
		Run: func(*cobra.Command, []string) {},
	}
	exe.Flags().AddGoFlagSet(efs)
	ver := &cobra.Command{Use: "version", Short: "print aokeyd's version (also -version, --version)", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(ini, exe, ver)
	return root
}

// referencePages are the reference pages of the files aokeyd reads, each
// generated from its decoder's schema (package refdoc): aokeyd.yaml(5),
// aokeyd-policy.yaml(5), aokeyd-keys.yaml(5).
func referencePages() []refdoc.Page {
	return []refdoc.Page{config.Reference(), policy.Reference(), keystore.Reference()}
}

// cmdMan is the hidden `aokeyd man DIR`: aokeyd(8) and its subcommands'
// pages, and the reference pages of section 5, which aokeyd(8) names
// under SEE ALSO.
func cmdMan(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: aokeyd man DIR")
		return 2
	}
	var refs []string
	for _, p := range referencePages() {
		refs = append(refs, p.Name+"(5)")
	}
	if err := manpage.Write(manTree(), version, args[0], append(refs, "aoctl(8)")...); err != nil {
		fmt.Fprintln(stderr, "aokeyd man:", err)
		return 1
	}
	if err := manpage.WriteReference(referencePages(), version, args[0]); err != nil {
		fmt.Fprintln(stderr, "aokeyd man:", err)
		return 1
	}
	return 0
}

// printUsage is `aokeyd help` (and -h, -help, --help): the commands, from
// the same tree as the man pages, and the daemon's flags.
func printUsage(w io.Writer) {
	root := manTree()
	fmt.Fprintf(w, "aokeyd: %s\n\nUsage:\n", root.Short)
	row := func(use, short string) {
		if len(use) > 36 {
			fmt.Fprintf(w, "  %s\n  %-36s  %s\n", use, "", short)
			return
		}
		fmt.Fprintf(w, "  %-36s  %s\n", use, short)
	}
	row("aokeyd [flags]", "run the daemon (flags below)")
	for _, c := range root.Commands() {
		row("aokeyd "+c.Use, c.Short)
	}
	row("aokeyd help", "print this help (also -h, -help, --help)")
	fmt.Fprintf(w, "\nFlags (-flag and --flag are the same):\n")
	dfs, _ := daemonFlags()
	dfs.SetOutput(w)
	dfs.PrintDefaults()
	fmt.Fprintf(w, "\naokeyd COMMAND -help shows a command's flags. See aokeyd(8); aoctl(8) is the operator's CLI.\n")
}

// subUsage is `aokeyd NAME -help`: the command's line, its description
// and its flags.
func subUsage(w io.Writer, name string, fs *flag.FlagSet) {
	for _, c := range manTree().Commands() {
		if c.Name() != name {
			continue
		}
		fmt.Fprintf(w, "Usage: aokeyd %s\n\n%s.\n\n%s\n\nFlags:\n", c.Use, c.Short, strings.TrimSpace(c.Long))
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
}
