package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docPlaceholders stand for values in the docs' commands; each is replaced
// by a value of its kind before the command runs. A placeholder the table
// does not know (<chain>) stays as it is, and fails as aoctl would.
var docPlaceholders = strings.NewReplacer(
	"CHAIN/KEY", "core/2026-11", "PEER", "192.0.2.2", "TARGET", "junos", "TIME", "2026-11-01",
	"CONFIG", "testdata/aokeyd.yaml", "FILE", "testdata/aokeyd.yaml", "DURATION", "90d", "VRF", "blue",
	"ROUTER", "router-a", `"$at"`, "2026-11-01T00:00:00Z",
)

// docCommandRE finds an aoctl command in a line of the docs: at the start
// of a code line (after an optional prompt) or of an inline code span.
var docCommandRE = regexp.MustCompile("(?:^\\s*(?:\\$ |# )?|`)(aoctl [^`]*)")

// optionalRE is an optional part of a help-style command line.
var optionalRE = regexp.MustCompile(` \[[^\]]*\]`)

// docCommand is one aoctl command of the docs and its line.
type docCommand struct {
	line int
	cmd  string
}

// docCommands returns the aoctl commands of a Markdown file with their
// lines: every line of a fenced or indented code block that runs aoctl,
// and every inline code span that begins with aoctl. A command ends at a
// comment, a pipe, a redirection or a list of commands; help-style
// alternatives ("A | B") keep the first.
func docCommands(text string) []docCommand {
	var out []docCommand
	fenced := false
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line, first := lines[i], i
		// A code line continued with a backslash is one command.
		for fenced && strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimRight(strings.TrimSuffix(line, "\\"), " ") + " " + strings.TrimSpace(lines[i])
		}
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		code := fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")
		for _, m := range docCommandRE.FindAllStringSubmatchIndex(line, -1) {
			inline := line[m[0]] == '`'
			if !inline && !code {
				continue
			}
			cmd := line[m[2]:m[3]]
			if strings.Contains(cmd, "...") {
				continue // elided: "aoctl migrate --all --at ..."
			}
			cmd = optionalRE.ReplaceAllString(cmd, "") // help-style [--bound 5m]
			for _, stop := range []string{" #", " &&", " ||", ";", " |", " >", " 2>"} {
				if j := strings.Index(cmd, stop); j >= 0 {
					cmd = cmd[:j]
				}
			}
			cmd = strings.TrimSpace(cmd)
			if inline && !positional(cmd) {
				continue // prose naming a command ("`aoctl validate` and aokeyd refuse")
			}
			out = append(out, docCommand{first + 1, cmd})
		}
	}
	return out
}

// positional reports whether cmd gives an argument beyond aoctl's command
// words, flags and their values: an invocation, not a command named in
// prose ("`aoctl peer-config --for bird` renders").
func positional(cmd string) bool {
	a := &app{getenv: func(string) string { return "" }}
	c := a.rootCommand()
	fields := shellFields(cmd)[1:]
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if sub, _, err := c.Find([]string{f}); err == nil && sub != c && sub.Name() == f {
			c = sub
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !strings.HasPrefix(f, "-") {
			return true
		}
		if fl := c.Flags().Lookup(name); fl != nil && fl.Value.Type() != "bool" && !hasValue {
			i++ // the flag's value
		}
	}
	return false
}

// shellFields splits a command as a shell would for the docs' plain
// commands: at spaces, with '...' and "..." quoting.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	quote, any := byte(0), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, any = c, true
		case c == ' ' || c == '\t':
			if cur.Len() > 0 || any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 || any {
		out = append(out, cur.String())
	}
	return out
}

// TestDocsCommands runs every aoctl command of the README and docs/ (code
// lines and inline code), its placeholders given values of their kind,
// against a socket where no daemon listens: each must get past aoctl's
// parsing (exit status 2 is a usage error: the command as written does
// not work). Issue 49 item 13: docs/keys.md wrote `aoctl revoke <chain>
// <key>`, which aoctl refuses; the form is CHAIN/KEY.
func TestDocsCommands(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../docs/reference/*.md")
	files = append(append(files, more...), "../../README.md")
	none := filepath.Join(t.TempDir(), "none.sock")
	ran := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, c := range docCommands(string(b)) {
			args := shellFields(docPlaceholders.Replace(c.cmd))[1:]
			r := runAoctl(t, none, args...)
			ran++
			if r.code == exitUsage {
				t.Errorf("%s:%d: `%s` is a usage error (exit %d):\n%s", name, c.line, c.cmd, r.code, r.stderr)
			}
		}
	}
	if ran < 10 {
		t.Errorf("ran %d commands of the docs; the extraction found too few", ran)
	}
}

// TestDocCommandExtraction pins what TestDocsCommands runs of a line.
func TestDocCommandExtraction(t *testing.T) {
	text := "intro `aoctl revoke <chain> <key>` and `aoctl status` (`aoctl peer-config --for bird`, `aoctl migrate PEER [--bound 5m]`)\n\n```sh\naoctl rotate 192.0.2.2 | --all   # roll\n$ aoctl plan --json > plan.json\nnot aoctl here\n```\n\n    aoctl validate CONFIG && systemctl reload aokeyd\n\nprose that says aoctl status is good\n\n```sh\naoctl peer-config 192.0.2.3 --for bird \\\n  --local 192.0.2.1 >x\n```\n"
	got := docCommands(text)
	want := []docCommand{{1, "aoctl revoke <chain> <key>"}, {1, "aoctl migrate PEER"}, {4, "aoctl rotate 192.0.2.2"},
		{5, "aoctl plan --json"}, {9, "aoctl validate CONFIG"}, {14, "aoctl peer-config 192.0.2.3 --for bird --local 192.0.2.1"}}
	if !slices.Equal(got, want) {
		t.Errorf("commands %+v, want %+v", got, want)
	}
	if f := shellFields(`aoctl fleet revoke core/k --reason "leaked in ticket 4711"`); len(f) != 6 || f[5] != "leaked in ticket 4711" {
		t.Errorf("shellFields = %q", f)
	}
}

// markdownLinkRE is a relative link of a Markdown file: [text](target).
var markdownLinkRE = regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)

// TestREADMEIsAFirstPage: the README is a page a newcomer reads in five
// minutes (at most 1,200 words): what aokeyd does, its requirements, the
// install, a first roll, where the guide, the references and the
// developer's make targets are, and the kernel requirements its error
// lines name; everything else is in docs/. Every relative link of the
// README and docs/ leads to a file of the tree (the operator's guide,
// docs/operations.md, is written beside this work and may not be there
// yet). Issue 49 item 14: the README was 6,712 words.
func TestREADMEIsAFirstPage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := len(strings.Fields(readme)); n > 1200 {
		t.Errorf("the README has %d words, more than five minutes' reading (1,200)", n)
	}
	for _, h := range []string{"## Requirements", "## Install", "## A first roll", "## Where to read next", "## Developers", "## Kernel requirements"} {
		if !strings.Contains(readme, "\n"+h+"\n") {
			t.Errorf("the README has no section %q", h)
		}
	}
	for _, w := range []string{"docs/operations.md", "man 5 aokeyd.yaml", "make demo", "make test", "CONFIG_TCP_AO",
		"gobgpd v3", "BIRD 2.17", "FRR", "trixie-backports", "docs/reference/"} {
		if !strings.Contains(readme, w) {
			t.Errorf("the README does not name %s", w)
		}
	}
	files, _ := filepath.Glob("../../docs/*.md")
	more, _ := filepath.Glob("../../docs/reference/*.md")
	for _, f := range append(append(files, more...), "../../README.md") {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLinkRE.FindAllStringSubmatch(string(text), -1) {
			target := filepath.Join(filepath.Dir(f), m[1])
			if strings.HasSuffix(target, "docs/operations.md") {
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which is not there", strings.TrimPrefix(f, "../../"), m[1])
			}
		}
	}
}
