package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
)

// envCPUProfile names a file for a CPU profile of a window of aokeyd's run
// that SIGUSR2 opens and the next SIGUSR2 closes (the real-speaker bench
// profiles a fleet roll and the revoke with it); envExecTrace names one for
// a runtime execution trace of the same windows (where goroutines wait:
// syscalls, the scheduler). A %d in a name is the window's number (1, 2,
// ...); without one each window overwrites the file. With neither set,
// SIGUSR2 keeps its default action.
const (
	envCPUProfile = "AOKEYD_CPUPROFILE"
	envExecTrace  = "AOKEYD_EXECTRACE"
)

// profileOnSignal starts the SIGUSR2 toggle when $AOKEYD_CPUPROFILE or
// $AOKEYD_EXECTRACE is set. It is a diagnostic: failures are reported on
// stderr and change nothing else.
func profileOnSignal(stderr io.Writer) {
	prof, tr := os.Getenv(envCPUProfile), os.Getenv(envExecTrace)
	if prof == "" && tr == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		var open []func()
		window := 0
		for range sig {
			if open != nil {
				for _, stop := range open {
					stop()
				}
				open = nil
				continue
			}
			window++
			open = []func(){}
			if stop := startWindow(stderr, prof, window, pprof.StartCPUProfile, pprof.StopCPUProfile); stop != nil {
				open = append(open, stop)
			}
			if stop := startWindow(stderr, tr, window, trace.Start, trace.Stop); stop != nil {
				open = append(open, stop)
			}
		}
	}()
}

// startWindow opens the file for window (pattern unset: none) and starts
// a recorder on it; the returned function stops the recorder and closes
// the file.
func startWindow(stderr io.Writer, pattern string, window int, start func(io.Writer) error, stop func()) func() {
	if pattern == "" {
		return nil
	}
	path := pattern
	if strings.Contains(pattern, "%d") {
		path = fmt.Sprintf(pattern, window)
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(stderr, "aokeyd: profile:", err)
		return nil
	}
	if err := start(f); err != nil {
		fmt.Fprintln(stderr, "aokeyd: profile:", err)
		f.Close()
		return nil
	}
	return func() {
		stop()
		if err := f.Close(); err != nil {
			fmt.Fprintln(stderr, "aokeyd: profile:", err)
		}
	}
}
