//go:build linux

package conformance

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

func TestKernelStack(t *testing.T) {
	kerneltest.Require(t)
	links := linkLocalLinks(t)
	Run(t, func(t *testing.T) Stack {
		k := NewKernelStack(2 * time.Second)
		k.LinkLocal = links
		return k
	})
}

// ip runs ip(8) with args and fails the test on an error.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// linkLocalLinks creates the two links of the link-local cases: dummy
// interfaces, up, each holding LinkLocalA and LinkLocalB (without
// duplicate address detection, so usable at once). A connection between
// two addresses of the host runs over loopback, but the kernel still binds
// and routes a link-local address by its zone.
func linkLocalLinks(t *testing.T) [2]Link {
	t.Helper()
	var ls [2]Link
	for i, name := range []string{"aokeyd-ll0", "aokeyd-ll1"} {
		_ = exec.Command("ip", "link", "del", name).Run() // a crashed run's
		ip(t, "link", "add", name, "type", "dummy")
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
		ip(t, "link", "set", name, "up")
		for _, a := range []string{LinkLocalA.String(), LinkLocalB.String()} {
			ip(t, "-6", "addr", "add", a+"/64", "dev", name, "nodad")
		}
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = Link{Name: name, Index: ifi.Index}
	}
	return ls
}
