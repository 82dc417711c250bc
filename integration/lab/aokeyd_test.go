package lab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestStartAokeydOrExit: an aokeyd that refuses to start (exit status 1,
// its refusal on stderr) is seen to have exited, without waiting for the
// control socket's timeout: the error wraps ErrExited and carries the
// exit status and the log's refusal.
func TestStartAokeydOrExit(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'aokeyd: refusing to start: 1 problem (aoctl validate lists the same):' >&2\n" +
		"echo 'keys.yaml:3:5: chains.core.keys[0].send_id: not an integer 0..255 (a KeyID)' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "aokeyd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	ctl := control.NewClient(filepath.Join(dir, "control.sock"), time.Second)
	began := time.Now()
	cmd, err := StartAokeydOrExit(t, nil, filepath.Join(dir, "aokeyd.log"), ctl, "-config", "aokeyd.yaml")
	if cmd != nil || !errors.Is(err, ErrExited) {
		t.Fatalf("StartAokeydOrExit: %v, %v; want no command and ErrExited", cmd, err)
	}
	for _, want := range []string{"exit status 1", "refusing to start", "chains.core.keys[0].send_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d := time.Since(began); d > ProcessStart/2 {
		t.Errorf("the exit was seen after %s, want it at once", d)
	}
}
