package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aokeyd/aokeyd/integration/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "aokeyd-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: aokeyd-bench run|render [flags]")
	}
	switch args[0] {
	case "run":
		return measure(args[1:], stderr)
	case "render":
		return render(args[1:], stdout)
	}
	return fmt.Errorf("unknown subcommand %q (want run or render)", args[0])
}

func ints(s, flagName string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func measure(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	out := fs.String("out", "", "directory for results.json and cpu.pprof (required)")
	sizes := fs.String("sizes", "1024,4096,16384", "peer counts N")
	reps := fs.String("reps", "7,4,2", "repetitions at each N")
	sample := fs.Int("sample", 256, "peers with synchronous deletes (extrapolated beyond)")
	batch := fs.Int("batch", 64, "SyncListener peers per batch")
	planSizes := fs.String("plan-sizes", "2500,5000,10000,20000", "fleet sizes of the planner sweep (empty: none)")
	revokePeers := fs.Int("revoke-peers", 1000, "emergency revoke: established sessions the revoke spans (0: skip)")
	daemonPeers := fs.Int("daemon-peers", 4096, "daemon memory/idle-pass run: peers (0: skip)")
	daemonKeys := fs.Int("daemon-keys", 4, "daemon memory/idle-pass run: keys per peer")
	passes := fs.Int("passes", 100, "daemon memory/idle-pass run: idle reconcile passes to average over")
	aoctl := fs.String("aoctl", "aoctl", "emergency revoke: the aoctl binary to execute")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("run: -out is required")
	}
	cfg := bench.Config{Sample: *sample, PeersPerBatch: *batch, Rand: rand.Reader,
		RevokePeers: *revokePeers, DaemonPeers: *daemonPeers, DaemonKeys: *daemonKeys, IdlePasses: *passes, Aoctl: *aoctl,
		Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	var err error
	if cfg.Sizes, err = ints(*sizes, "sizes"); err != nil {
		return err
	}
	if cfg.Reps, err = ints(*reps, "reps"); err != nil {
		return err
	}
	if cfg.PlanSizes, err = ints(*planSizes, "plan-sizes"); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	prof, err := os.Create(filepath.Join(*out, "cpu.pprof"))
	if err != nil {
		return err
	}
	defer prof.Close()
	cfg.CPUProfile = prof
	pass, err := os.Create(filepath.Join(*out, "pass.pprof"))
	if err != nil {
		return err
	}
	defer pass.Close()
	cfg.PassProfile = pass
	steady, err := os.Create(filepath.Join(*out, "steady.pprof"))
	if err != nil {
		return err
	}
	defer steady.Close()
	cfg.SteadyProfile = steady
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeJSON(filepath.Join(*out, "results.json"), res)
}

func writeJSON(path string, res *bench.Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

type benchFiles []string

func (b *benchFiles) String() string     { return strings.Join(*b, " ") }
func (b *benchFiles) Set(s string) error { *b = append(*b, s); return nil }

func render(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	in := fs.String("in", "", "results.json written by run (required)")
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
		return errors.New("render: -in is required")
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var res bench.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("render: %s: %w", *in, err)
	}
	for _, spec := range benches {
		where, file, ok := strings.Cut(spec, "=")
		if !ok {
			return fmt.Errorf("render: -bench %q: want WHERE=FILE", spec)
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
			return fmt.Errorf("render: -bench %s: no benchmark lines in %s", where, file)
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
	res.Skipped = bench.Skips(&res)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(*out, "results.json"), &res); err != nil {
		return err
	}
	var tb strings.Builder
	if err := bench.WriteTable(&tb, &res); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "report.txt"), []byte(tb.String()), 0o644); err != nil {
		return err
	}
	pf, err := os.Create(filepath.Join(*out, "report.png"))
	if err != nil {
		return err
	}
	if err := bench.WritePNG(pf, &res); err != nil {
		pf.Close()
		return err
	}
	if err := pf.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, tb.String())
	return err
}
