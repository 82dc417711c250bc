package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestManPagesAndCompletion: aoctl man writes a page for aoctl and for
// every command, each naming every flag the command takes (they are
// generated from the command tree, so a new flag is in its page), and the
// completion scripts for bash, zsh and fish are generated.
func TestManPagesAndCompletion(t *testing.T) {
	dir := t.TempDir()
	if r := runAoctl(t, "", "man", dir); r.code != exitOK || r.stderr != "" {
		t.Fatalf("aoctl man: exit %d: %s", r.code, r.stderr)
	}
	a := &app{getenv: func(string) string { return "" }}
	a.socket = "/run/aokeyd/control.sock"
	root := a.rootCommand()
	pages := 0
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		for _, cc := range append(c.Commands(), c) {
			if cc.Name() == "help" {
				continue
			}
			name := strings.ReplaceAll(cc.CommandPath(), " ", "-") + ".8"
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("no page for %s: %v", cc.CommandPath(), err)
				continue
			}
			pages++
			for _, f := range []string{"json", "socket"} {
				if !strings.Contains(string(b), `\fB--`+f+`\fP`) {
					t.Errorf("%s does not document --%s", name, f)
				}
			}
			cc.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(string(b), `\fB--`+f.Name+`\fP`) {
					t.Errorf("%s does not document --%s", name, f.Name)
				}
			})
		}
	}
	if pages < len(commands())+2 {
		t.Errorf("%d pages for %d commands", pages, len(commands()))
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := runAoctl(t, "", "completion", sh)
		if r.code != exitOK || !strings.Contains(r.stdout, "aoctl") || len(r.stdout) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes: %s", sh, r.code, len(r.stdout), r.stderr)
		}
	}
}
