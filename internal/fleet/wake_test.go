package fleet

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// publishLog records when each document was published.
type publishLog struct {
	mu  sync.Mutex
	ats []time.Time
}

func (l *publishLog) FleetFailed(string) {}
func (l *publishLog) FleetPublished(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ats = append(l.ats, at)
}

func (l *publishLog) since(t time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, at := range l.ats {
		if !at.Before(t) {
			out = append(out, at.Sub(t))
		}
	}
	return out
}

// runPublisher runs p until the returned stop is called.
func runPublisher(t *testing.T, p *Publisher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestPublisherWakeRateLimited: a wake after a quiet spell publishes at
// once; wakes in a burst (a fleet-wide roll changing every session) are
// coalesced into one round per WakeGap; the refresh goes on after them.
func TestPublisherWakeRateLimited(t *testing.T) {
	cases := []struct {
		name    string
		gap     time.Duration // Options.WakeGap (0: Refresh/4)
		wantGap time.Duration
	}{
		{"default gap, a quarter of the refresh", 0, 2500 * time.Millisecond},
		{"configured gap", time.Second, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, c := newVault(t)
				st := Store{V: Client{c}, Mount: "secret", Prefix: "f"}
				fd := &fakeDaemon{}
				var pl publishLog
				const refresh = 10 * time.Second
				p := NewPublisher(Options{Store: st, RouterID: "r1", Refresh: refresh, WakeGap: tc.gap, Status: fd.status, Revoke: fd.revoke, Metrics: &pl})
				defer runPublisher(t, p)()
				synctest.Wait() // the first round

				// Quiet for longer than the gap: a wake publishes at once.
				time.Sleep(tc.wantGap + time.Second)
				t0 := time.Now()
				p.Wake()
				synctest.Wait()
				if got := pl.since(t0); len(got) != 1 || got[0] != 0 {
					t.Fatalf("a wake after a quiet spell published at %v, want once at once", got)
				}

				// A burst right after it: 20 wakes over 2 gaps, every 10th of
				// a gap, between the rounds' starts.
				time.Sleep(tc.wantGap / 20)
				for i := range 20 {
					if i > 0 {
						time.Sleep(tc.wantGap / 10)
					}
					p.Wake()
				}
				synctest.Wait()
				burstEnd := time.Now()
				time.Sleep(tc.wantGap)
				synctest.Wait()
				got := pl.since(t0.Add(time.Nanosecond))
				// Rounds start at t0+gap and t0+2gap, never closer than the gap.
				if len(got) != 2 {
					t.Fatalf("20 wakes over %v published at %v after the first, want 2 rounds (one per gap)", burstEnd.Sub(t0), got)
				}
				prev := t0
				for _, d := range got {
					at := t0.Add(time.Nanosecond).Add(d)
					if at.Sub(prev) < tc.wantGap {
						t.Errorf("rounds at %v and %v: closer than the gap %v", prev.Sub(t0), at.Sub(t0), tc.wantGap)
					}
					prev = at
				}
				// The last wake (at the burst's end) is published within a gap.
				if last := t0.Add(time.Nanosecond).Add(got[len(got)-1]); last.Before(burstEnd) || last.Sub(burstEnd) > tc.wantGap {
					t.Errorf("the burst's last wake (%v) published at %v, want within %v after it", burstEnd.Sub(t0), last.Sub(t0), tc.wantGap)
				}

				// No wake: the refresh publishes on its own.
				t2 := time.Now()
				time.Sleep(refresh + time.Second)
				synctest.Wait()
				if got := pl.since(t2); len(got) != 1 {
					t.Errorf("quiet refresh: published at %v, want once", got)
				}
			})
		})
	}
}
