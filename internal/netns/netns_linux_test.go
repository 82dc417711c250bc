package netns

import (
	"errors"
	"os"
	"testing"
)

// TestDoOwnNamespace: pid 0 and a pid in the caller's namespace run fn
// directly, with its error; a pid that does not exist is an error that
// says so, and fn does not run. (Entering another namespace is tested in
// the guest, by tcpao's TestRaiseOptMemIn and bgp/sockets' lookups in a
// speaker's namespace.)
func TestDoOwnNamespace(t *testing.T) {
	errFn := errors.New("fn's error")
	for _, pid := range []int{0, os.Getpid()} {
		ran := false
		if err := Do(pid, func() error { ran = true; return errFn }); !errors.Is(err, errFn) || !ran {
			t.Errorf("pid %d: ran %v, err %v; want fn run and its error", pid, ran, err)
		}
	}
	ran := false
	if err := Do(1<<30, func() error { ran = true; return nil }); !errors.Is(err, os.ErrNotExist) || ran {
		t.Errorf("no such pid: ran %v, err %v; want ErrNotExist and fn not run", ran, err)
	}
}
