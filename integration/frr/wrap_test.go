package frr

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
)

// The wrapper test's stand-ins, this test binary run again: "aokeyd" is
// `aokeyd exec -socket SOCK -- BIN ARGS` (it listens on SOCK, runs BIN as
// its child, and holds SOCK for AOKEYD_WRAP_LINGER after the child
// exited, as a launcher on its way out does for a moment); "bgpd" listens
// on its vty socket (--vty_socket DIR, named after its executable) and
// writes its pid to DIR/bgpd.pid.
const wrapFakeEnv = "AOKEYD_WRAP_FAKE"

func init() {
	switch os.Getenv(wrapFakeEnv) {
	case "aokeyd":
		os.Exit(fakeLauncher(os.Args[1:]))
	case "bgpd":
		os.Exit(fakeBgpd(os.Args[1:]))
	}
}

func fakeLauncher(args []string) int {
	if len(args) < 4 || args[0] != "exec" || args[1] != "-socket" || args[3] != "--" {
		fmt.Fprintln(os.Stderr, "fake aokeyd: usage: exec -socket SOCK -- BIN ARGS")
		return 2
	}
	os.Remove(args[2])
	l, err := net.Listen("unix", args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake aokeyd:", err)
		return 1
	}
	defer l.Close()
	cmd := exec.Command(args[4], args[5:]...)
	cmd.Env = append(os.Environ(), wrapFakeEnv+"=bgpd")
	cmd.Stderr = os.Stderr
	_ = cmd.Run()
	linger, _ := time.ParseDuration(os.Getenv("AOKEYD_WRAP_LINGER"))
	time.Sleep(linger)
	return 0
}

func fakeBgpd(args []string) int {
	dir := ""
	for i, a := range args {
		if a == "--vty_socket" && i+1 < len(args) {
			dir = args[i+1]
		}
	}
	vty := filepath.Join(dir, filepath.Base(os.Args[0])+".vty")
	os.Remove(vty)
	l, err := net.Listen("unix", vty)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake bgpd:", err)
		return 1
	}
	defer l.Close()
	if err := os.WriteFile(filepath.Join(dir, "bgpd.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return 1
	}
	for { // until killed (blocked in accept: no deadlock for the runtime to see)
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		c.Close()
	}
}

// TestWrapRestartsAfterACrash: bgpd killed, watchfrr runs bgpd_wrap again
// at once, while the dead bgpd's `aokeyd exec` still holds the connect
// guard's socket for a moment. The wrapper waits for that launcher to go
// and starts a new bgpd. It used to take the held socket for a running
// bgpd, start none, and fail after AOKEYD_WRAP_WAIT (CI on 41535e8:
// TestFRRWatchfrr's bgpd never came back in 2 minutes; the wrapper said
// "cg.sock is held by a running aokeyd exec; not starting another bgpd").
func TestWrapRestartsAfterACrash(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "bgpd.pid")); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	wrap := func(what string) {
		t.Helper()
		cmd := exec.Command("sh", wrapScript, self, "--vty_socket", dir, "-d")
		cmd.Env = append(os.Environ(), "AOKEYD="+self, "AOKEYD_CONNECTGUARD="+filepath.Join(dir, "cg.sock"),
			"AOKEYD_WRAP_WAIT=10", "AOKEYD_WRAP_LINGER=2s", wrapFakeEnv+"=aokeyd")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: bgpd_wrap: %v: %s", what, err, out.String())
		}
		t.Logf("%s: bgpd_wrap returned: %s", what, strings.TrimSpace(out.String()))
	}
	bgpdPID := func() int {
		b, err := os.ReadFile(filepath.Join(dir, "bgpd.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	wrap("first start")
	first := bgpdPID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, "the killed bgpd gone", func() (bool, string) {
		return syscall.Kill(first, 0) != nil, ""
	})
	wrap("restart while the old launcher lingers")
	if second := bgpdPID(); second == first || syscall.Kill(second, 0) != nil {
		t.Fatalf("after the restart: bgpd pid %d (the killed one was %d), want a new, running bgpd", second, first)
	}
}
