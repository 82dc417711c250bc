// Package manpage writes a cobra command tree's man pages (section 8: the
// aokeyd binaries administer a system daemon), one per command, dated by
// $SOURCE_DATE_EPOCH when set so that a package build is reproducible.
package manpage

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Write writes root's pages into dir, created if needed; version is the
// pages' source ("aokeyd VERSION").
func Write(root *cobra.Command, version, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.DisableAutoGenTag = true
	h := &doc.GenManHeader{Title: strings.ToUpper(root.Name()), Section: "8", Source: "aokeyd " + version,
		Manual: "aokeyd manual", Date: sourceDate()}
	return doc.GenManTree(root, h, dir)
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
