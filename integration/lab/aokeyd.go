package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// StartAokeyd runs the aokeyd binary with args inside ns (nil: the test's
// own namespace), its output going to logPath, and waits until it answers
// on its control socket through ctl. When the test fails, aokeyd dumps its
// goroutines into the log (SIGQUIT) before it is killed at the end of the
// test.
func StartAokeyd(t testing.TB, ns *netns.NS, logPath string, ctl *control.Client, args ...string) *exec.Cmd {
	t.Helper()
	cmd, err := StartAokeydOrExit(t, ns, logPath, ctl, args...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// ErrExited is in StartAokeydOrExit's error when aokeyd exited before it
// answered: a start it refused (exit status 1, its log naming each
// problem in aoctl validate's words, as it does on every problem validate
// refuses, the keys' included).
var ErrExited = errors.New("aokeyd exited before it answered on its control socket")

// StartAokeydOrExit is StartAokeyd for a start aokeyd may refuse: it
// returns once aokeyd answers on its control socket, or with an error
// wrapping ErrExited (its exit status and its log's tail) once it has
// exited, or with a timeout after ProcessStart. It never fails the test
// itself, so a goroutine of the test may call it.
func StartAokeydOrExit(t testing.TB, ns *netns.NS, logPath string, ctl *control.Client, args ...string) (*exec.Cmd, error) {
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
	var gone error
	err := Within(ProcessStart, "aokeyd's control socket "+ctl.Socket(), func() (bool, string) {
		if exited(proc) {
			// Reaped here: it has exited, Wait does not block.
			gone = fmt.Errorf("%w (%v); its log ends:\n%s", ErrExited, cmd.Wait(), Tail(logPath, 4000))
			return true, ""
		}
		_, err := ctl.Health(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	if err == nil {
		err = gone
	}
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

// exited reports whether p has exited, without reaping it (waitid with
// WNOWAIT): whoever waits for it later still gets its status.
func exited(p *os.Process) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == int32(unix.SIGCHLD)
}
