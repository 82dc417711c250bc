package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, now: time.Now, getenv: os.Getenv, probe: tcpao.Probe,
		algorithms: func() (map[tcpao.Algorithm]error, string) { return tcpao.ProbeAlgorithms(), tcpao.KernelRelease() }}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
