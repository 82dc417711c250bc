package birdnative

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/policy"
)

// BenchmarkApplyRevoke1000: one application of a revoke's lists to 1,000
// peers' files (the shared key dropped, the backup preferred), BIRD's
// parser a taken shape and its configure the fake control socket's.
func BenchmarkApplyRevoke1000(b *testing.B) {
	e, _ := newTestExecutor(b)
	const n = 1000
	peers := make([]peer.Key, n)
	for i := range n {
		peers[i] = peer.KeyOf(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(1 + i%250)}), "")
	}
	two := input{Desired: []policy.ScheduledKey{sk(2, true), sk(3, true)}, Preferred: 0}
	plans := map[peer.Key]daemon.ExecPlan{}
	for _, id := range peers {
		plans[id] = execPlan(id, two, 1)
	}
	if out := e.applyPlans(context.Background(), plans); out.ConfigureErr != nil || len(out.Failed) > 0 {
		b.Fatalf("%+v", out)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		revoke, back := map[peer.Key]daemon.ExecPlan{}, map[peer.Key]daemon.ExecPlan{}
		for _, id := range peers {
			in := two
			in.Written = writtenKeys(b, e.fileOfPeer(id))
			in.Desired, in.Preferred, in.Revoked = []policy.ScheduledKey{sk(3, true)}, 0, []ids{{2, 102}}
			pl := execPlan(id, in, uint64(2*i+2))
			pl.Revoke = true
			revoke[id] = pl
			back[id] = execPlan(id, two, uint64(2*i+3))
		}
		b.StartTimer()
		if out := e.applyPlans(context.Background(), revoke); out.ConfigureErr != nil || len(out.Failed) > 0 {
			b.Fatalf("%+v", out)
		}
		b.StopTimer()
		if out := e.applyPlans(context.Background(), back); out.ConfigureErr != nil || len(out.Failed) > 0 {
			b.Fatalf("%v", fmt.Sprint(out))
		}
		b.StartTimer()
	}
}

// BenchmarkObserve1000: the executor's read of 1,000 peers' files (no
// BIRD process: no session read), as a revoke's plan reads them.
func BenchmarkObserve1000(b *testing.B) {
	e, _ := newTestExecutor(b)
	const n = 1000
	peers := make([]peer.Key, n)
	plans := map[peer.Key]daemon.ExecPlan{}
	two := input{Desired: []policy.ScheduledKey{sk(2, true), sk(3, true)}, Preferred: 0}
	for i := range n {
		peers[i] = peer.KeyOf(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(1 + i%250)}), "")
		plans[peers[i]] = execPlan(peers[i], two, 1)
	}
	if out := e.applyPlans(context.Background(), plans); out.ConfigureErr != nil || len(out.Failed) > 0 {
		b.Fatalf("%+v", out)
	}
	b.ResetTimer()
	for range b.N {
		if obs := e.Observe(context.Background(), peers); len(obs) != n {
			b.Fatal(len(obs))
		}
	}
}
