//go:build linux

package tcpao_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestProbe: on the host (no CONFIG_TCP_AO) Probe says so in a line that
// names the option and the README section; in the guest it passes.
func TestProbe(t *testing.T) {
	err := tcpao.Probe()
	if kerneltest.InGuest() {
		if err != nil {
			t.Fatalf("Probe in the TCP-AO guest: %v", err)
		}
		return
	}
	if !errors.Is(err, tcpao.ErrNoKernelSupport) || !errors.Is(err, unix.ENOPROTOOPT) {
		t.Fatalf("Probe without CONFIG_TCP_AO = %v, want ErrNoKernelSupport wrapping ENOPROTOOPT", err)
	}
	for _, want := range []string{"CONFIG_TCP_AO", "Kernel requirements"} {
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Probe error %q: want one line naming %q", err, want)
		}
	}
}

// TestProbeInGuest is the guest's half of TestProbe under
// kerneltest.Require, so that a guest run cannot pass by skipping it.
func TestProbeInGuest(t *testing.T) {
	kerneltest.Require(t)
	if err := tcpao.Probe(); err != nil {
		t.Fatalf("Probe on the TCP-AO kernel: %v", err)
	}
}

// TestProbeAlgorithmsKernel: the guest's kernel (CONFIG_CRYPTO_HMAC, SHA1,
// SHA256, CMAC and AES) accepts every algorithm aokeyd offers; on the host
// (no TCP-AO) none is reported accepted.
func TestProbeAlgorithmsKernel(t *testing.T) {
	got := tcpao.ProbeAlgorithms()
	for _, a := range tcpao.Algorithms {
		err, ok := got[a]
		if !ok {
			t.Fatalf("%s: no answer", a)
		}
		if kerneltest.InGuest() {
			if err != nil {
				t.Errorf("%s on the TCP-AO kernel: %v", a, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s accepted by a kernel without TCP-AO", a)
		}
	}
	if kerneltest.InGuest() {
		t.Logf("kernel algorithms: %v", got)
	}
}

// TestProbeAlgorithmsInGuest is TestProbeAlgorithmsKernel's guest half
// under kerneltest.Require.
func TestProbeAlgorithmsInGuest(t *testing.T) {
	kerneltest.Require(t)
	for a, err := range tcpao.ProbeAlgorithms() {
		if err != nil {
			t.Errorf("%s on the TCP-AO kernel: %v", a, err)
		}
	}
}
