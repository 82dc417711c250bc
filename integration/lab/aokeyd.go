package lab

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/netns"
	"github.com/aokeyd/aokeyd/internal/control"
)

// StartAokeyd runs the aokeyd binary with args inside ns (nil: the test's
// own namespace), its output going to logPath, and waits until it answers
// on its control socket through ctl. When the test fails, aokeyd dumps its
// goroutines into the log (SIGQUIT) before it is killed at the end of the
// test.
func StartAokeyd(t testing.TB, ns *netns.NS, logPath string, ctl *control.Client, args ...string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if ns != nil {
		cmd = ns.Start(t, logPath, MustBin(t, "aokeyd"), args...)
	} else {
		cmd = netns.StartCmd(t, logPath, exec.Command(MustBin(t, "aokeyd"), args...))
	}
	proc := cmd.Process
	t.Cleanup(func() {
		if t.Failed() {
			_ = proc.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
		}
	})
	Eventually(t, ProcessStart, "aokeyd's control socket "+ctl.Socket(), func() (bool, string) {
		_, err := ctl.Health(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return cmd
}
