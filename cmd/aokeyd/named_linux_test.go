package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// startNamed starts a copy of sleep(1) named name in dir (its comm, as a
// process scan sees it), killed when the test ends.
func startNamed(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := exec.Command(bin, "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _, _ = c.Process.Wait() })
	return c
}
