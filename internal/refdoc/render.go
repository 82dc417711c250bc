package refdoc

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// generated is the note each rendered page carries.
const generated = "Generated from the schema by `go test ./cmd/aokeyd -run TestReferencePages -update` (internal/refdoc); do not edit."

// paragraphs splits text at blank lines.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.TrimRight(p, "\n"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// verbatim reports whether a paragraph is shown as is (its lines are
// indented by a tab).
func verbatim(p string) bool { return strings.HasPrefix(p, "\t") }

// facts is a setting's type, default and when it is required, as one
// line.
func (s Setting) facts(code func(string) string) string {
	parts := []string{s.Type}
	if s.Default != "" {
		parts = append(parts, "default "+code(s.Default))
	}
	if s.Required != "" {
		parts = append(parts, "required: "+s.Required)
	}
	return strings.Join(parts, "; ")
}

// Markdown renders the page for docs/reference.
func (p Page) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s(5): %s\n\n<!-- %s -->\n\n", p.Name, p.Summary, generated)
	for _, par := range paragraphs(p.Intro) {
		if verbatim(par) {
			b.WriteString("```\n" + untab(par) + "\n```\n\n")
			continue
		}
		b.WriteString(par + "\n\n")
	}
	b.WriteString("## Settings\n\n")
	for _, s := range p.Settings {
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n", s.Path, s.facts(func(v string) string { return "`" + v + "`" }))
		if s.Text != "" {
			b.WriteString(s.Text + "\n\n")
		}
		if s.Example != "" {
			fmt.Fprintf(&b, "Example: `%s`\n\n", s.Example)
		}
	}
	fmt.Fprintf(&b, "## Example\n\n```yaml\n%s\n```\n", strings.TrimRight(p.Example, "\n"))
	if len(p.SeeAlso) > 0 {
		fmt.Fprintf(&b, "\n## See also\n\n%s\n", strings.Join(p.SeeAlso, ", "))
	}
	return b.String()
}

// untab removes one leading tab of each line.
func untab(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n")
}

var codeRE = regexp.MustCompile("`([^`]*)`")

// roff escapes text for a man page: backslashes, and a line that would
// start with a request.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// roffText escapes prose and renders its `code` in bold.
func roffText(s string) string { return codeRE.ReplaceAllString(roff(s), `\fB$1\fR`) }

// Man renders the page as a man page of section 5, dated date (nil:
// today) from source ("aokeyd VERSION").
func (p Page) Man(date *time.Time, source string) string {
	d := time.Now().UTC()
	if date != nil {
		d = *date
	}
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" %s\n", generated)
	fmt.Fprintf(&b, ".TH %q 5 %q %q \"aokeyd manual\"\n", strings.ToUpper(p.Name), d.Format("Jan 2006"), source)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n.SH DESCRIPTION\n", roff(p.Name), roffText(p.Summary))
	for _, par := range paragraphs(p.Intro) {
		if verbatim(par) {
			fmt.Fprintf(&b, ".PP\n.RS\n.nf\n%s\n.fi\n.RE\n", roff(untab(par)))
			continue
		}
		fmt.Fprintf(&b, ".PP\n%s\n", roffText(par))
	}
	b.WriteString(".SH SETTINGS\n")
	for _, s := range p.Settings {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", roff(s.Path), roffText(s.facts(func(v string) string { return "`" + v + "`" })))
		if s.Text != "" {
			fmt.Fprintf(&b, ".br\n%s\n", roffText(s.Text))
		}
		if s.Example != "" {
			fmt.Fprintf(&b, ".br\nExample: \\fB%s\\fR\n", roff(s.Example))
		}
	}
	fmt.Fprintf(&b, ".SH EXAMPLE\n.nf\n%s\n.fi\n", roff(strings.TrimRight(p.Example, "\n")))
	if len(p.SeeAlso) > 0 {
		var refs []string
		for _, r := range p.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(r, ")"), "(")
			refs = append(refs, fmt.Sprintf(".BR %s (%s)", roff(name), sec))
		}
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", strings.Join(refs, ",\n"))
	}
	return b.String()
}
