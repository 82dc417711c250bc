package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/policy"
)

// table writes aligned columns like `gobgp neighbor`.
type table struct {
	tw     *tabwriter.Writer
	indent string
}

func newTable(w io.Writer, indent string, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), indent: indent}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, t.indent+strings.Join(cells, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// human renders a duration for tables: "3d4h", "12m", "45s".
func human(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	switch {
	case d >= 24*time.Hour:
		d = d.Round(time.Hour)
	case d >= time.Hour:
		d = d.Round(time.Minute)
	default:
		d = d.Round(time.Second)
	}
	s := policy.FormatDuration(d)
	if neg {
		s = "-" + s
	}
	return s
}

// when renders an instant relative to now: "2026-11-01T00:00:00Z (in 3d)".
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	switch {
	case d > 0:
		return fmt.Sprintf("%s (in %s)", stamp(t), human(d))
	case d < 0:
		return fmt.Sprintf("%s (%s ago)", stamp(t), human(-d))
	}
	return stamp(t) + " (now)"
}

func lifetime(l control.Lifetime) string {
	if l.Start.IsZero() && l.End.IsZero() {
		return "always"
	}
	s, e := "-", "-"
	if !l.Start.IsZero() {
		s = l.Start.UTC().Format("2006-01-02T15:04Z")
	}
	if !l.End.IsZero() {
		e = l.End.UTC().Format("2006-01-02T15:04Z")
	}
	return s + ".." + e
}

func mark(b bool) string {
	if b {
		return "*"
	}
	return ""
}

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
