package main

import (
	"context"
	"crypto/rand"
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
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "aokeyd-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "run" {
		return errors.New("usage: aokeyd-bench run [flags] (the report is drawn on the host by aokeyd-bench-report)")
	}
	return measure(args[1:], stderr)
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
	turns := fs.Int("turns", 8, "rotations the raw loop and aokeyd take in turns on one listener at the largest N (0: none)")
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
	cfg := bench.Config{Sample: *sample, Turns: *turns, PeersPerBatch: *batch, Rand: rand.Reader,
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
	heap, err := os.Create(filepath.Join(*out, "heap.pprof"))
	if err != nil {
		return err
	}
	defer heap.Close()
	cfg.HeapProfile = heap
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return bench.WriteResults(filepath.Join(*out, "results.json"), res)
}
