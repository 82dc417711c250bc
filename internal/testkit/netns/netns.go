// Package netns makes the test hosts of the scenario tests: Linux network
// namespaces joined by veth pairs, with addresses that exist only inside
// them. Everything is removed when the test ends.
package netns

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// NS is one named network namespace (ip netns add NAME).
type NS struct {
	Name string
}

// New creates namespace name with its loopback up; it is deleted at the end
// of the test (processes started with Start are killed first).
func New(t testing.TB, name string) *NS {
	t.Helper()
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		_ = exec.Command("ip", "netns", "del", name).Run() // a leftover of a killed run
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &NS{Name: name}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n.MustRun(t, "ip", "link", "set", "lo", "up")
	return n
}

// Run runs a command inside the namespace and returns its combined output.
// An ip command switches namespace itself (ip -n NAME): one exec, where
// ip netns exec NAME ip is two: an exec of ip cost 0.17 s on an idle
// emulated guest, and a ten-router lab spent 24 s of its 32 s set-up
// making its namespaces and links.
func (n *NS) Run(args ...string) (string, error) {
	return n.run("", args...)
}

// run is Run with stdin (none when empty).
func (n *NS) run(stdin string, args ...string) (string, error) {
	var cmd *exec.Cmd
	if len(args) > 0 && args[0] == "ip" {
		cmd = exec.Command("ip", append([]string{"-n", n.Name}, args[1:]...)...)
	} else {
		cmd = exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustRun is Run that fails the test on error.
func (n *NS) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Command returns an exec.Cmd that runs inside the namespace.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Start starts a long-running process inside the namespace, with its output
// going to logPath, and kills it when the test ends.
func (n *NS) Start(t testing.TB, logPath string, name string, args ...string) *exec.Cmd {
	t.Helper()
	return StartCmd(t, logPath, n.Command(name, args...))
}

// StartCmd starts cmd (in whatever namespace it is set up for) with its
// output going to logPath, and kills it when the test ends.
func StartCmd(t testing.TB, logPath string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		f.Close()
	})
	return cmd
}

// Do runs fn on an OS thread that has entered the namespace, so sockets fn
// opens live there. The thread is returned to its namespace afterwards, or
// retired if that fails.
func (n *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", n.Name, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		return fmt.Errorf("setns back from %s: %w", n.Name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Link joins a and b with a veth pair and gives each end an address
// (CIDR notation), bringing both up.
func Link(t testing.TB, a *NS, aIf, aAddr string, b *NS, bIf, bAddr string) {
	t.Helper()
	// Create inside a, then move the peer end to b: no interface ever
	// appears in the caller's namespace.
	// One ip -batch per side: two execs instead of five (see Run).
	a.MustBatch(t, fmt.Sprintf("link add %s type veth peer name %s netns %s\naddr add %s dev %s\nlink set %s up\n", aIf, bIf, b.Name, aAddr, aIf, aIf))
	b.MustBatch(t, fmt.Sprintf("addr add %s dev %s\nlink set %s up\n", bAddr, bIf, bIf))
}

// MustBatch runs ip commands (one per line, without the leading "ip")
// inside the namespace with one ip -batch, failing the test on error.
func (n *NS) MustBatch(t testing.TB, cmds string) {
	t.Helper()
	if _, err := n.run(cmds, "ip", "-batch", "-"); err != nil {
		t.Fatalf("%v\n%s", err, cmds)
	}
}

// Available reports whether namespaces can be made here (root and the ip
// tool), with the reason when not.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "needs root for network namespaces"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "needs iproute2's ip"
	}
	return true, ""
}
