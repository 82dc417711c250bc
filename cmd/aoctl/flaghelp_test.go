package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// singleDash is a flag spelled -name in a help text.
var singleDash = regexp.MustCompile(`(^|[\s\[(])-[a-z][a-z-]*`)

// Every help text spells its flags one way, --name: the flag lists (Go's
// flag package printed -name there) and the words around them.
func TestHelpFlagStyle(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	helps := [][]string{{"--help"}, {"fleet", "--help"}}
	for _, c := range commands() {
		if c.subs == nil {
			helps = append(helps, []string{c.name, "--help"})
		}
		for _, s := range c.subs {
			helps = append(helps, []string{c.name, s.name, "--help"})
		}
	}
	for _, args := range helps {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runAoctl(t, none, args...)
			if r.code != exitOK || r.stdout == "" {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			for i, l := range strings.Split(r.stdout, "\n") {
				if m := singleDash.FindString(l); m != "" {
					t.Errorf("line %d spells a flag with one dash (%q): %s", i+1, strings.TrimSpace(m), l)
				}
			}
		})
	}
}

// A flag error names the flag as the help does.
func TestFlagErrorStyle(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--colour"}, "flag provided but not defined: --colour"},
		{[]string{"status", "-colour"}, "flag provided but not defined: --colour"},
		{[]string{"status", "--vrf"}, "flag needs an argument: --vrf"},
		{[]string{"status", "--json=maybe"}, `invalid boolean value "maybe" for --json`},
		{[]string{"status", "--timeout", "soon"}, `invalid value "soon" for flag --timeout`},
	} {
		r := runAoctl(t, none, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("aoctl %s: exit %d, stderr %q; want %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}
