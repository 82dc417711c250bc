package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aokeyd/aokeyd/internal/manpage"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// manCommand writes aoctl's man pages, generated from the command tree.
// Hidden: the package build runs it (make deb); operators read the pages
// it wrote.
func (a *app) manCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "write aoctl's man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := manpage.Write(c.Root(), version, args[0]); err != nil {
				fmt.Fprintf(a.stderr, "aoctl man: %v\n", err)
				a.code = exitError
			}
			return nil
		},
	}
}
