package sockets

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestFindProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	self := strings.TrimSpace(string(b))
	if pid, err := FindProcess(self, "x.pid_file"); err == nil && pid != os.Getpid() {
		t.Errorf("FindProcess(%q) = %d, want this process %d", self, pid, os.Getpid())
	} else if err != nil && !strings.Contains(err.Error(), "set x.pid_file") {
		// Another process of the same name (a parallel test binary) is
		// the only acceptable failure, and it names the setting.
		t.Errorf("FindProcess(%q): %v", self, err)
	}
	if _, err := FindProcess("no-such-process-name", "x.pid_file"); err == nil {
		t.Error("FindProcess of a name no process has: no error")
	}
}
