//go:build linux

package conformance

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// Environment of TestDifferential: the number of sequences (default 300,
// `make differential` runs thousands), the seed (default: the clock; every
// failure prints it) and one sequence to replay alone.
const (
	envSequences = "AOKEYD_DIFFERENTIAL_SEQUENCES"
	envSeed      = "AOKEYD_DIFFERENTIAL_SEED"
	envReplay    = "AOKEYD_DIFFERENTIAL_SEQ"
)

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an integer", name, v)
	}
	return n
}

// vrfIndex creates a VRF device for the keys' ifindex and returns its index.
func vrfIndex(t *testing.T) int {
	const name = "aokeyd-diff"
	if out, err := exec.Command("ip", "link", "add", name, "type", "vrf", "table", "4242").CombinedOutput(); err != nil {
		t.Fatalf("ip link add %s type vrf: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	if out, err := exec.Command("ip", "link", "set", name, "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s up: %v: %s", name, err, out)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ifi.Index
}

// makeTestSeed is the seed of the sequences make test runs.
const makeTestSeed = 1

// TestDifferential runs random operation sequences through the in-memory
// kernel and the real one and fails on the first step where they differ.
func TestDifferential(t *testing.T) {
	kerneltest.Require(t)
	n := int(envInt(t, envSequences, 300))
	// make test replays one fixed set of sequences, so that its verdict
	// is the code's and not the draw's; make differential draws a new seed
	// each run to explore.
	seed := uint64(envInt(t, envSeed, makeTestSeed))
	first, last := 0, n
	if i := envInt(t, envReplay, -1); i >= 0 {
		first, last = int(i), int(i)+1
	}
	vrf := vrfIndex(t)
	d := Differential{
		New: func() (Stack, Stack, error) {
			return NewMemStack(tcpaotest.WithVRF(vrf)), NewKernelStack(diffLong), nil
		},
		VRF: vrf,
	}
	t.Logf("seed %d, %d sequences, VRF ifindex %d (replay one: %s=%d %s=N)", seed, n, vrf, envSeed, seed, envReplay)
	start := time.Now()
	ops, diverged := 0, 0
	for i := first; i < last; i++ {
		o, div, err := d.Sequence(seed, i)
		ops += o
		if err != nil {
			t.Fatalf("sequence %d: %v", i, err)
		}
		if div != nil {
			diverged++
			if diverged <= 3 {
				t.Error(div)
			} else {
				t.Errorf("sequence %d diverged at %q", i, div.Steps[len(div.Steps)-1])
			}
		}
	}
	t.Logf("%d ops in %v", ops, time.Since(start).Round(time.Millisecond))
	fmt.Printf("differential: sequences=%d ops=%d diverged=%d\n", last-first, ops, diverged)
}
