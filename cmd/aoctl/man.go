package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// manCommand writes aoctl's man pages, generated from the command tree
// (section 8: aoctl operates a system daemon). Hidden: the package build
// runs it (make deb); operators read the pages it wrote.
func (a *app) manCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "write aoctl's man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := c.Root()
			root.DisableAutoGenTag = true
			h := &doc.GenManHeader{Title: "AOCTL", Section: "8", Source: "aokeyd " + version, Manual: "aokeyd manual", Date: sourceDate()}
			if err := doc.GenManTree(root, h, args[0]); err != nil {
				fmt.Fprintf(a.stderr, "aoctl man: %v\n", err)
				a.code = exitError
			}
			return nil
		},
	}
}

// sourceDate is $SOURCE_DATE_EPOCH (reproducible builds: the package's
// pages carry the commit's date), or nil for today.
func sourceDate() *time.Time {
	sec, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return nil
	}
	t := time.Unix(sec, 0).UTC()
	return &t
}
