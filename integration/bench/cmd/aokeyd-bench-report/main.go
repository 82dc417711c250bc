package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aokeyd/aokeyd/integration/bench"
	"github.com/aokeyd/aokeyd/integration/bench/chart"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "aokeyd-bench-report:", err)
		os.Exit(1)
	}
}

type benchFiles []string

func (b *benchFiles) String() string     { return strings.Join(*b, " ") }
func (b *benchFiles) Set(s string) error { *b = append(*b, s); return nil }

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("aokeyd-bench-report", flag.ContinueOnError)
	in := fs.String("in", "", "results.json written by aokeyd-bench run (required)")
	out := fs.String("out", "bench-report", "report directory")
	top := fs.String("profile-top", "", "go tool pprof -top output to include")
	passTop := fs.String("pass-top", "", "go tool pprof -top -cum output of the idle-pass profile to include")
	steadyTop := fs.String("steady-top", "", "go tool pprof -top -cum output of the steady-window profile to include")
	var benches benchFiles
	fs.Var(&benches, "bench", "WHERE=FILE: `go test -bench -benchmem` output to include (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" {
		return errors.New("-in is required")
	}
	res, err := bench.ReadResults(*in)
	if err != nil {
		return err
	}
	for _, spec := range benches {
		where, file, ok := strings.Cut(spec, "=")
		if !ok {
			return fmt.Errorf("-bench %q: want WHERE=FILE", spec)
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		rows, err := bench.ParseGoBench(where, f)
		f.Close()
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("-bench %s: no benchmark lines in %s", where, file)
		}
		res.PlanBench = append(res.PlanBench, rows...)
	}
	for _, p := range []struct {
		file string
		dst  *string
	}{{*top, &res.Profile}, {*passTop, &res.PassProfile}, {*steadyTop, &res.SteadyProfile}} {
		if p.file == "" {
			continue
		}
		t, err := os.ReadFile(p.file)
		if err != nil {
			return err
		}
		*p.dst = string(t)
	}
	res.Skipped = bench.Skips(res)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := bench.WriteResults(filepath.Join(*out, "results.json"), res); err != nil {
		return err
	}
	var table, data, png bytes.Buffer
	if err := bench.WriteTable(&table, res); err != nil {
		return err
	}
	if err := bench.WriteData(&data, res); err != nil {
		return err
	}
	if err := chart.WritePNG(&png, res); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"report.txt", table.Bytes()}, {"report.tsv", data.Bytes()}, {"report.png", png.Bytes()}} {
		if err := os.WriteFile(filepath.Join(*out, f.name), f.b, 0o644); err != nil {
			return err
		}
	}
	_, err = stdout.Write(table.Bytes())
	return err
}
