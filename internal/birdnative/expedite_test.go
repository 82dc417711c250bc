package birdnative

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/policy"
)

// TestConfigureExpeditesRCU (kernel.expedite_rcu): BIRD's configure, in
// which it deletes each dropped key from its session one after another,
// runs while the executor holds RCU expedited, released after it.
func TestConfigureExpeditesRCU(t *testing.T) {
	e, fb := newTestExecutor(t)
	var held, holds atomic.Int32
	e.o.Expedite = func() func() {
		held.Add(1)
		holds.Add(1)
		return func() { held.Add(-1) }
	}
	heldAtConfigure := int32(-1)
	fb.mu.Lock()
	fb.onConfigure = func() { heldAtConfigure = held.Load() }
	fb.mu.Unlock()
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	out := runOnce(t, e, execPlan(id, input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0}, 1))
	if out.ConfigureErr != nil || len(out.Failed) > 0 {
		t.Fatalf("outcome %+v", out)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if heldAtConfigure != 1 || held.Load() != 0 || holds.Load() != 1 {
		t.Errorf("held at the configure %d, after it %d, holds %d; want 1, 0, 1", heldAtConfigure, held.Load(), holds.Load())
	}
}
