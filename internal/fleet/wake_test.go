package fleet

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/vault/api"
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

// countingTransport counts the requests for one path.
type countingTransport struct {
	http.RoundTripper
	path string
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == c.path {
		c.n.Add(1)
	}
	return c.RoundTripper.RoundTrip(r)
}

// A round that a wake asked for publishes without reading the revocation
// record when the last read was less than a refresh ago: the far ends'
// view of a roll waits for no extra Vault round trip. The record is still
// read once per refresh while wakes keep coming, so a revocation written
// meanwhile is applied within a refresh.
func TestWokenRoundsReadTheRecordOncePerRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := newVault(t)
		cfg := srv.ClientConfig()
		ct := &countingTransport{RoundTripper: cfg.HttpClient.Transport, path: "/v1/secret/metadata/f/revocations"}
		cfg.HttpClient.Transport = ct
		pc, err := api.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pc.SetToken(srv.RootToken())
		st := Store{V: Client{pc}, Mount: "secret", Prefix: "f"}
		fd := &fakeDaemon{}
		var pl publishLog
		const refresh, gap = 10 * time.Second, 2500 * time.Millisecond
		p := NewPublisher(Options{Store: st, RouterID: "r1", Refresh: refresh, Status: fd.status, Revoke: fd.revoke, Metrics: &pl})
		ctx := context.Background()
		defer runPublisher(t, p)()
		synctest.Wait() // the first round reads the record
		t0 := time.Now()
		var written time.Time
		for i := range 16 { // a wake every gap for 40 s: 16 woken rounds
			time.Sleep(gap)
			if i == 5 {
				written = time.Now()
				if _, _, err := (Store{V: Client{c}, Mount: "secret", Prefix: "f"}).AddRevocation(ctx,
					Revocation{Chain: "core", Key: "k1", By: "test", Reason: "woken rounds", At: written}); err != nil {
					t.Fatal(err)
				}
			}
			p.Wake()
			synctest.Wait()
		}
		rounds := len(pl.since(t0))
		if rounds < 15 {
			t.Fatalf("%d rounds over 16 wakes a gap apart, want one per wake", rounds)
		}
		// The first round's read, then one per refresh over 40 s: 5, not 17.
		if got := ct.n.Load(); got < 4 || got > 6 {
			t.Errorf("the revocation record was read %d times in the first round and %d woken rounds over 40 s, want once per refresh (5)", got, rounds)
		}
		var seen time.Time
		for _, a := range p.Last().Revocations {
			if a.Chain == "core" && a.Key == "k1" {
				seen = a.Seen
			}
		}
		if seen.IsZero() || seen.Sub(written) > refresh {
			t.Errorf("a revocation written while wakes kept coming: seen at %v after the write, want within a refresh (%v)", seen.Sub(written), refresh)
		}
	})
}
