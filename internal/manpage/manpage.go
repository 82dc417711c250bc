// Package manpage writes a cobra command tree's man pages (section 8: the
// aokeyd binaries administer a system daemon), one per command, and the
// reference pages of the files they read (section 5, from package
// refdoc), dated by $SOURCE_DATE_EPOCH when set so that a package build is
// reproducible.
package manpage

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/aokeyd/aokeyd/internal/refdoc"
)

// Write writes root's pages into dir, created if needed; version is the
// pages' source ("aokeyd VERSION"). seeAlso ("aokeyd.yaml(5)") is added
// to the SEE ALSO section of root's own page.
func Write(root *cobra.Command, version, dir string, seeAlso ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.DisableAutoGenTag = true
	h := &doc.GenManHeader{Title: strings.ToUpper(root.Name()), Section: "8", Source: "aokeyd " + version,
		Manual: "aokeyd manual", Date: sourceDate()}
	if err := doc.GenManTree(root, h, dir); err != nil {
		return err
	}
	if len(seeAlso) == 0 {
		return nil
	}
	return addSeeAlso(filepath.Join(dir, root.Name()+".8"), seeAlso)
}

// addSeeAlso appends refs to the SEE ALSO section of the page at path
// (cobra ends a page with it), or adds the section.
func addSeeAlso(path string, refs []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var bold []string
	for _, r := range refs {
		bold = append(bold, `\fB`+r+`\fP`)
	}
	page := strings.TrimRight(string(b), "\n")
	if strings.Contains(page, "\n.SH SEE ALSO\n") {
		page += ", " + strings.Join(bold, ", ") + "\n"
	} else {
		page += "\n\n.SH SEE ALSO\n" + strings.Join(bold, ", ") + "\n"
	}
	return os.WriteFile(path, []byte(page), 0o644)
}

// WriteReference writes each page as NAME.5 into dir, created if needed.
func WriteReference(pages []refdoc.Page, version, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range pages {
		if err := os.WriteFile(filepath.Join(dir, p.Name+".5"), []byte(p.Man(sourceDate(), "aokeyd "+version)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sourceDate is $SOURCE_DATE_EPOCH, or nil for today.
func sourceDate() *time.Time {
	sec, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return nil
	}
	t := time.Unix(sec, 0).UTC()
	return &t
}
