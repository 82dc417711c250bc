// Package kerneltest gates tests that need the real TCP-AO kernel.
//
// Such tests call Require(t) first. On the host they skip with a message that
// says where they run; inside the guest VM that `make test-kernel` boots
// (integration/vm), the guest's init sets AOKEYD_GUEST_KERNEL=1 and they run.
// The host harness fails the run if any guest test reports a skip, so a
// kernel test can never pass in CI by skipping.
package kerneltest

import (
	"os"
	"testing"
)

// EnvVar is set to "1" by the guest init script.
const EnvVar = "AOKEYD_GUEST_KERNEL"

// InGuest reports whether this process runs inside the TCP-AO test VM.
func InGuest() bool { return os.Getenv(EnvVar) == "1" }

// Require skips t unless it runs inside the TCP-AO guest VM.
func Require(t testing.TB) {
	t.Helper()
	if !InGuest() {
		t.Skip("kernel test: runs in the TCP-AO guest VM (make test-kernel); stock kernels lack CONFIG_TCP_AO")
	}
}
