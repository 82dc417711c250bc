package rotator

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// pollRecorder records when a machine reads its socket's keys.
type pollRecorder struct {
	tcpao.Socket
	mu    sync.Mutex
	reads []time.Time
}

func (p *pollRecorder) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	p.mu.Lock()
	if now := time.Now(); len(p.reads) == 0 || !p.reads[len(p.reads)-1].Equal(now) {
		p.reads = append(p.reads, now)
	}
	p.mu.Unlock()
	return p.Socket.Keys(f)
}

func (p *pollRecorder) times(t0 time.Time) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]time.Duration, 0, len(p.reads))
	for _, r := range p.reads {
		out = append(out, r.Sub(t0))
	}
	return out
}

// TestDefaultControllerJittersSteadyPolls: a controller built with zero
// Options (as daemon.New builds it when nothing is injected) spreads the
// steady re-reads of peers taken over at the same instant: without a random
// source by default, every peer would read its socket every Steady exactly,
// all of them in the same second.
func TestDefaultControllerJittersSteadyPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := NewController(Options{})
		defer ctl.Close()
		t0 := time.Now()
		var recs []*pollRecorder
		for i, p := range []string{"192.0.2.1/32", "192.0.2.2/32"} {
			a := mkKey(p, 1, 1, fmt.Sprint("a", i))
			id := pid(p)
			r := &pollRecorder{Socket: newEstablished(a)}
			recs = append(recs, r)
			ctl.SetDesired(id, want(a))
			if _, err := ctl.Accepted(id, r); err != nil {
				t.Fatal(err)
			}
		}
		// Ten default steady periods (30s each, ±10%).
		time.Sleep(10 * 30 * time.Second)
		synctest.Wait()
		a, b := recs[0].times(t0), recs[1].times(t0)
		if len(a) < 8 || len(b) < 8 {
			t.Fatalf("steady reads %v and %v: want about ten each", a, b)
		}
		if slices.Equal(a, b) {
			t.Errorf("both peers read their sockets at the same instants %v: no jitter by default", a)
		}
		for _, ts := range [][]time.Duration{a, b} {
			for i := 2; i < len(ts); i++ {
				if d := ts[i] - ts[i-1]; d < 26*time.Second || d > 34*time.Second {
					t.Errorf("steady re-read %s after the one before, want 30s ±10%% (rounded up to a second): %v", d, ts)
				}
			}
		}
	})
}
