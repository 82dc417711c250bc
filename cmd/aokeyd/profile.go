package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// envCPUProfile names a file for a CPU profile of a window of aokeyd's run
// that SIGUSR2 opens and the next SIGUSR2 closes (the real-speaker bench
// profiles a fleet roll with it). Unset, SIGUSR2 keeps its default action.
const envCPUProfile = "AOKEYD_CPUPROFILE"

// profileOnSignal starts the SIGUSR2 toggle when $AOKEYD_CPUPROFILE is set.
// Each window overwrites the file. It is a diagnostic: failures are
// reported on stderr and change nothing else.
func profileOnSignal(stderr io.Writer) {
	path := os.Getenv(envCPUProfile)
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		var fh *os.File
		for range sig {
			if fh != nil {
				pprof.StopCPUProfile()
				if err := fh.Close(); err != nil {
					fmt.Fprintln(stderr, "aokeyd: cpu profile:", err)
				}
				fh = nil
				continue
			}
			f, err := os.Create(path)
			if err != nil {
				fmt.Fprintln(stderr, "aokeyd: cpu profile:", err)
				continue
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintln(stderr, "aokeyd: cpu profile:", err)
				f.Close()
				continue
			}
			fh = f
		}
	}()
}
