package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLISurface pins aoctl's command-line surface — every command's help,
// usage errors, flag spellings (--flag, -flag, --flag=v, flags before and
// after the command, "--") and exit codes — in one golden file, so that a
// change of the flag machinery (the standard library's flag, then a command
// library) shows as a diff here and nowhere else. Every invocation runs
// without a daemon: the ones that get past parsing end at "unreachable".
func TestCLISurface(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	invocations := [][]string{
		{},
		{"help"},
		{"--help"},
		{"-h"},
		{"-help"},
		{"frobnicate"},
		{"--colour"},
		{"--colour", "status"},
		{"fleet"},
		{"fleet", "--help"},
		{"fleet", "frobnicate"},
	}
	for _, c := range commands() {
		invocations = append(invocations, []string{c.name, "--help"}, []string{c.name, "-h"}, []string{c.name, "--colour"})
	}
	invocations = append(invocations,
		[]string{"fleet", "status", "--help"},
		[]string{"fleet", "revoke", "--help"},
		[]string{"fleet", "status", "extra"},
		[]string{"fleet", "status", "--horizon", "soon"},
		[]string{"fleet", "revoke", "core/k1"},
		[]string{"fleet", "revoke", "core/k1", "--wait"},
		// Global flags before and after the command, both spellings.
		[]string{"status"},
		[]string{"--json", "status"},
		[]string{"status", "--json"},
		[]string{"status", "-json"},
		[]string{"-json", "status"},
		[]string{"status", "--json=true"},
		[]string{"status", "--json=maybe"},
		[]string{"status", "--timeout", "soon"},
		[]string{"status", "--timeout=2s"},
		[]string{"status", "--vrf"},
		[]string{"status", "--vrf", "blue"},
		[]string{"status", "a", "b"},
		[]string{"status", "--", "--json"},
		[]string{"status", "--brief", "192.0.2.2", "--vrf", "blue"},
		[]string{"status", "--keys", "--brief"},
		[]string{"status", "--every"},
		[]string{"status", "--watch", "--interval", "0s"},
		[]string{"rotate", "192.0.2.2", "--wait"},
		[]string{"plan", "extra"},
		[]string{"plan", "--at", "2026-11-01"},
		[]string{"plan", "--events", "many"},
		[]string{"rotate"},
		[]string{"rotate", "192.0.2.2", "--all"},
		[]string{"rotate", "--all"},
		[]string{"rotate", "192.0.2.2", "--vrf=blue"},
		[]string{"revoke"},
		[]string{"revoke", "2026-10"},
		[]string{"revoke", "core/2026-10", "--peer", "192.0.2.2"},
		[]string{"replace"},
		[]string{"replace", "core/k1", "--md5"},
		[]string{"replace", "core/k1"},
		[]string{"adopt"},
		[]string{"adopt", "192.0.2.2", "--vrf", "blue"},
		[]string{"adopt", "192.0.2.2", "--prefix"},
		[]string{"migrate"},
		[]string{"migrate", "192.0.2.2", "--all"},
		[]string{"migrate", "--all", "--at", "soon"},
		[]string{"migrate", "--all", "--bound", "soon"},
		[]string{"migrate", "192.0.2.2", "--abort"},
		[]string{"validate"},
		[]string{"validate", "a", "b"},
		[]string{"validate", "testdata/aokeyd.yaml", "--horizon", "never"},
		[]string{"validate", "testdata/aokeyd.yaml", "--at", "soon"},
		// Problems, in the one shape FILE:LINE:COL: FIELD: PROBLEM; HINT.
		[]string{"validate", "testdata/bad.yaml", "--no-kernel"},
		[]string{"validate", "testdata/bad.yaml", "--no-kernel", "--json"},
		[]string{"validate", "testdata/keys.yaml", "--no-kernel"},
		[]string{"peer-config"},
		[]string{"peer-config", "192.0.2.2"},
		[]string{"peer-config", "192.0.2.2", "--for", "cisco"},
		[]string{"peer-config", "10.0.0.256", "--for", "bird"}, // neither an address nor an interface ("router2" could be one)
		[]string{"peer-config", "192.0.2.2", "--for", "bird", "--far-interface", "eth1"},
		[]string{"peer-config", "192.0.2.2", "--for", "bird", "--local", "me"},
		[]string{"peer-config", "192.0.2.2", "--for", "bird", "--at", "soon"},
		[]string{"version", "extra"},
		[]string{"version"},
	)
	var b strings.Builder
	for _, args := range invocations {
		r := runAoctl(t, none, args...)
		fmt.Fprintf(&b, "$ aoctl %s\nexit %d\n", strings.Join(args, " "), r.code)
		for _, s := range []struct{ name, text string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
			if s.text == "" {
				continue
			}
			fmt.Fprintf(&b, "[%s]\n%s", s.name, strings.ReplaceAll(s.text, none, "NONE.sock"))
			if !strings.HasSuffix(s.text, "\n") {
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
	golden(t, "cli.golden", b.String())
}
