package daemon_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestRaiseOptMem: with kernel.raise_optmem the daemon asks for
// net.core.optmem_max in the speaker's network namespace (by its pid) to be
// at least what the listener's keys need, with headroom, before it syncs the
// listener, and logs the change; the listener then takes its keys.
func TestRaiseOptMem(t *testing.T) { synctest.Test(t, testRaiseOptMem) }

func testRaiseOptMem(t *testing.T) {
	_, k1, k2, _ := testKeys()
	type call struct{ pid, want int }
	var mu sync.Mutex
	var calls []call
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, raiseOptMem: func(pid, want int) (int, int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{pid, want})
		return 1000, want, nil
	}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 {
		t.Fatal("RaiseOptMem never called")
	}
	need := 2 * tcpao.KeyOptMem(tcpao.HMACSHA256)
	for _, c := range calls {
		if c.pid != speakerPID {
			t.Errorf("RaiseOptMem for pid %d, want the speaker's %d", c.pid, speakerPID)
		}
		if c.want < need+need/4 {
			t.Errorf("RaiseOptMem to %d, want at least %d (the listener's %d bytes and a quarter)", c.want, need+need/4, need)
		}
	}
	if !strings.Contains(e.logs.String(), `"msg":"raised net.core.optmem_max in the speaker's network namespace"`) {
		t.Errorf("no log line for the raise:\n%s", e.logs.String())
	}
}
